"""The measured window opens once every user has started, not once each is spawned.

A user's start (connect, SCRIPT LOAD on every master, take a seat) can outlast
the warm-up on a loaded machine or a cluster; a window opened before the last
user ran measured a queue with no worker (0 jobs on one master in CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.server import EmbeddedRedis
from bench.paths import REPO

pytestmark = pytest.mark.locust

SLOW_START_S = 1.0  # each user's start takes this long: five times the warm-up below

SLOW_LOCUSTFILE = f"""
import gevent
from bench.stages.finish_fetch.in_locust.user import RedisUser
from bench.locustfile import ProbeUser, ProducerUser, WorkerUser  # noqa: F401 (Locust finds them)

_start = RedisUser.on_start


def _slow_start(self):
    gevent.sleep({SLOW_START_S})
    _start(self)


RedisUser.on_start = _slow_start
"""


def test_the_window_waits_for_users_whose_start_outlasts_warm_up(tmp_path: Path, redis_server: EmbeddedRedis):
    locustfile = tmp_path / "slow_start_locustfile.py"
    locustfile.write_text(SLOW_LOCUSTFILE)
    summary_path = tmp_path / "run_summary.json"
    command = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--only-summary"]
    command += ["--workers", "2", "--producers", "1", "--warmup-s", "0.2", "--measure-s", "0.5"]
    command += ["--summary-json", str(summary_path), "--queue", "slow-start"]
    done = subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, "REDIS_URL": redis_server.url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(summary_path.read_text())
    # Timed from the spawn, the window closed 0.7 s in, before any user ran: 0 jobs.
    assert summary["complete"] is True and summary["derived"]["jobs"] > 0, summary["derived"]
