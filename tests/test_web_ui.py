"""Locust's web UI as a user drives it, by HTTP: no password in any answer, our live tab with µs
percentiles and jobs/s, the profile's user counts, a summary in a run folder of its own, and a
Redis that cannot serve the run refused before any user starts. Direct headless runs too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.harness.server import EmbeddedRedis
from bench.paths import LOCUSTFILE, REPO
from bench.protocol.connection import Client, RedisSettings
from tests.helpers import wait_until

pytestmark = pytest.mark.locust

PASSWORD = "ux-Secret-8f3kq2"
# Every GET route of Locust's UI (locust/web.py), and ours.
GET_ROUTES = (
    "/", "/stats/requests", "/stats/report", "/stats/requests/csv", "/stats/requests_full_history/csv",
    "/stats/failures/csv", "/exceptions", "/exceptions/csv", "/tasks", "/logs", "/worker-count",
    "/echomq/live",
)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(base: str, path: str) -> str:
    """The body of a GET, an error page's too (it must hold no password either)."""
    try:
        with urllib.request.urlopen(base + path, timeout=10) as answer:
            return str(answer.read().decode())
    except urllib.error.HTTPError as error:
        return str(error.read().decode())


def _post(base: str, path: str, form: dict[str, str]) -> dict[str, Any]:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(base + path, data=data), timeout=30) as answer:
        result: dict[str, Any] = json.loads(answer.read().decode())
        return result


class LocustUI:
    """`locust -f bench/locustfile.py` with its web UI on a loopback port, stopped at the end."""

    def __init__(self, url: str, results: Path, log: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.results = results
        self.log = log
        self.queue = f"t-{uuid.uuid4().hex}"
        env = {**os.environ, "REDIS_URL": url, "EMQ_RESULTS_DIR": str(results)}
        command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--config", "profiles/smoke.conf"]
        command += [
            "--web-host",
            "127.0.0.1",
            "--web-port",
            str(self.port),
            "--queue",
            self.queue,
        ]
        self.handle = log.open("w")
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=self.handle, stderr=subprocess.STDOUT
        )
        wait_until(self._up, 60, "the web UI to answer")

    def _up(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            _get(self.base, "/")
            return True
        except (urllib.error.URLError, ConnectionError):
            return False

    def live(self) -> dict[str, Any]:
        return json.loads(_get(self.base, "/echomq/live"))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.handle.close()


@pytest.fixture(scope="module")
def password_url(settings: RedisSettings, redis_server: EmbeddedRedis) -> Iterator[str]:
    """A user with a password on the test server (the default user stays as it was)."""
    user = f"ux{uuid.uuid4().hex[:6]}"
    client = settings.connect()
    client.execute_command("ACL", "SETUSER", user, "on", f">{PASSWORD}", "~*", "&*", "+@all")
    host_port = redis_server.url.removeprefix("redis://").split("/")[0]
    try:
        yield f"redis://{user}:{PASSWORD}@{host_port}/0"
    finally:
        client.execute_command("ACL", "DELUSER", user)
        client.close()


@pytest.fixture(scope="module")
def ui(password_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocustUI]:
    """One Locust web UI for the module's tests of it: a refused start first, then a whole test."""
    folder = tmp_path_factory.mktemp("ui")
    started = LocustUI(password_url, folder / "results", folder / "locust.log")
    yield started
    started.stop()


def _all_answers(ui: LocustUI) -> dict[str, str]:
    return {path: _get(ui.base, path) for path in GET_ROUTES}


def test_a_start_with_a_bad_setting_is_refused_with_the_reason(ui: LocustUI):
    # before the module's other test of the same UI starts a run: no user has started yet
    refused = _post(ui.base, "/swarm", {"Workers": "two"})
    assert not refused["success"] and "'two' is not a whole number" in refused["message"], refused
    assert json.loads(_get(ui.base, "/stats/requests"))["user_count"] == 0


@pytest.mark.slow
def test_the_ui_never_sends_the_password_and_its_tab_shows_us_percentiles_and_jobs_per_s(ui: LocustUI):
    before = _all_answers(ui)
    page = before["/"]
    assert "redis://" in page and ":***@" in page  # the Host field shows the server, redacted
    assert '"missing_host_warning": false' in page  # REDIS_URL is set: no "missing host" banner
    assert '"extended_tabs"' in page and "echomq live" in page
    for label in (
        "Measured window",
        "Simulated round trip",
        "Warm-up",
        "Batch size",
        "Jobs in flight",
        "Job time",
        "Queues",
        "Regime",
    ):
        assert f'"{label}"' in page  # labels a person reads
    assert "Measure S" not in page and "Rtt Ms" not in page
    args, _ = json.JSONDecoder().raw_decode(page.split("window.templateArgs = ", 1)[1])
    shown_host = args["host"]
    assert shown_host.endswith("/0") and ":***@" in shown_host
    form = {"host": shown_host, "Workers": "2", "Producers": "1", "Warm-up": "0.5", "Measured window": "3"}
    form["Jobs in flight"] = "1"  # the smoke profile holds 4 a worker: one a worker, one round trip a job
    started = _post(ui.base, "/swarm", {**form, "Strategy": "fused"})
    assert started["success"], started
    assert PASSWORD not in json.dumps(started)

    def measuring_with_figures() -> bool:
        live = ui.live()
        rows = {row["measure"]: row for row in live["rows"] if live["measuring"]}
        jobs = next((r for m, r in rows.items() if m.startswith("jobs finished")), None)
        cycle = rows.get("worker cycle (finish + fetch)")
        return bool(jobs and jobs["jobs_per_s"] and cycle and cycle["p50_us"])

    wait_until(measuring_with_figures, 30, "the live tab to show the window's figures")
    live = ui.live()
    rows = {row["measure"]: row for row in live["rows"]}
    cycle = rows["worker cycle (finish + fetch)"]
    assert isinstance(cycle["p50_us"], int) and 0 < cycle["p50_us"] <= cycle["p99_us"] <= cycle["max_us"]
    assert cycle["p50_us"] < 1_000_000  # µs, not Locust's whole milliseconds
    jobs = next(r for m, r in rows.items() if m.startswith("jobs finished"))
    # smoke keeps 4 jobs in flight a worker: a flush carries up to 4 finishes (1/4 round trip a job)
    assert jobs["jobs_per_s"] > 0 and 0.25 <= jobs["round_trips_per_job"] <= 1.3
    assert jobs["commands_per_job"] is not None and jobs["commands_per_job"] >= 1
    # smoke's regime is backlog: enqueue to finish is the backlog's wait there, not queue latency
    assert "backlog wait (enqueue to finish)" in rows and "call moveToFinished+fetch" in rows
    assert {row["regime"] for row in live["rows"]} == {"backlog"}

    def stats() -> dict[str, Any]:
        return json.loads(_get(ui.base, "/stats/requests"))  # Locust caches it for 2 s

    # producers 1 + workers 2, as the form said: the profile's shape sets the users
    wait_until(lambda: stats()["user_count"] == 3, 10, "3 users")
    extended = stats()["extended_stats"]
    assert extended[0]["key"] == "echomq" and extended[0]["data"]
    during = _all_answers(ui)
    # measure-s ends the UI test as it ends a headless one, and the summary goes to a run folder
    wait_until(lambda: not ui.live()["measuring"] and stats()["state"] == "stopped", 30,
               "the test to stop after warm-up + measure")  # fmt: skip
    [summary_path] = ui.results.glob("*-locust-fused/finish_fetch_summary.json")
    summary = json.loads(summary_path.read_text())
    assert (
        summary["measured"] and summary["settings"]["workers"] == 2 and summary["settings"]["producers"] == 1
    )
    assert summary["audit"]["ok"], summary["audit"]
    # the folder's meta.json follows the summary, then the log names the summary
    wait_until(lambda: summary_path.name in ui.log.read_text(), 10, "the log to name the summary")
    meta = json.loads((summary_path.parent / "meta.json").read_text())
    assert meta["complete"] and meta["stages_done"] == ["finish_fetch"] and PASSWORD not in json.dumps(meta)
    finished = [r for r in ui.live()["rows"] if r["state"] == "finished"]
    assert finished and finished[0]["strategy"] == "fused"
    # One header, one count: the tab's "Commands a job" is the terminal's cmd/job (the summary's
    # commands_per_job: one script call a fused job, at the client); the server's count, producers'
    # addJob included, under a header that says so.
    titles = {c["key"]: c["title"] for c in ui.live()["columns"]}
    assert titles["commands_per_job"] == "Commands a job"
    assert titles["server_calls_per_job"] == "Server calls a job, producers included"
    assert finished[0]["commands_per_job"] == pytest.approx(summary["derived"]["commands_per_job"], abs=1e-3)
    assert finished[0]["commands_per_job"] == pytest.approx(1.0, abs=0.05)
    assert finished[0]["server_calls_per_job"] > finished[0]["commands_per_job"]  # + the producers' calls
    after = _all_answers(ui)
    for when, answers in (("before", before), ("during", during), ("after", after)):
        for path, text in answers.items():
            assert PASSWORD not in text, f"{when} the run, {path} holds the password"
    assert PASSWORD not in ui.log.read_text()


@pytest.mark.slow
def test_a_missing_redis_is_one_line_in_the_terminal_and_a_message_in_the_ui(tmp_path: Path):
    url = f"redis://:{PASSWORD}@127.0.0.1:{_free_port()}/0"  # nothing listens there
    ui = LocustUI(url, tmp_path / "results", tmp_path / "locust.log")
    try:
        wait_until(lambda: "cannot reach Redis" in ui.log.read_text(), 15, "the start-up check's line")
        refused = _post(ui.base, "/swarm", {"host": "", "Workers": "2"})
        assert not refused["success"] and "cannot reach Redis" in refused["message"], refused
        assert "press Start again" in refused["message"]
        time.sleep(0.5)  # nothing is supposed to happen: give a started user the time to fail
        stats = json.loads(_get(ui.base, "/stats/requests"))
        assert stats["user_count"] == 0 and stats["state"] == "ready"
        log = ui.log.read_text()
        assert "Traceback" not in log and PASSWORD not in log
        assert sum("cannot reach Redis" in line for line in log.splitlines()) == 2  # start-up, Start
    finally:
        ui.stop()


def _headless(redis_url: str, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary"]
    command += [
        "--warmup-s",
        "0.3",
        "--measure-s",
        "1",
        "--batch-size",
        "10",
        "--queue",
        f"t-{uuid.uuid4().hex}",
    ]
    env = {**os.environ, "REDIS_URL": redis_url, "EMQ_RESULTS_DIR": str(results)}
    return subprocess.run([*command, *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=90)


def test_a_headless_run_without_csv_writes_its_summary_and_says_where(
    redis_server: EmbeddedRedis, client: Client, tmp_path: Path
):
    done = _headless(redis_server.url, tmp_path, "--workers", "2", "--strategy", "two_call")
    assert done.returncode == 0, done.stderr
    [summary_path] = tmp_path.glob("*-locust-two_call/finish_fetch_summary.json")
    summary = json.loads(summary_path.read_text())
    # a headless test deletes its queue's keys as a UI test does
    assert summary["audit"]["ok"] and not list(
        client.scan_iter(match=f"*{{{summary['settings']['queue']}}}*")
    )
    assert summary["measured"] and summary["settings"]["workers"] == 2
    assert f"the run's summary is in {summary_path}" in done.stderr
    assert "is in None" not in done.stderr
    assert json.loads((summary_path.parent / "meta.json").read_text())["complete"] is True


def test_a_headless_user_count_that_differs_from_the_profile_is_refused(
    redis_server: EmbeddedRedis, tmp_path: Path
):
    done = _headless(redis_server.url, tmp_path, "--workers", "4", "-u", "3")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("echomq-bench: error: -u 3 does not match producers 1 + workers 4 = 5")
    assert not any("Traceback" in line for line in lines)
    assert not list(tmp_path.glob("*"))  # refused before a test, so no folder


def _ui_test(ui: LocustUI, strategy: str, keep: bool) -> dict[str, Any]:
    """One short test started from the UI's form, to its end; its summary."""
    form = {"Workers": "2", "Producers": "1", "Warm-up": "0.3", "Measured window": "1", "Jobs in flight": "1"}
    started = _post(ui.base, "/swarm", {**form, "Strategy": strategy, "Keep queue": str(keep).lower()})
    assert started["success"], started
    pattern = f"*-locust-{strategy}/finish_fetch_summary.json"
    wait_until(lambda: any(ui.results.glob(pattern)), 40, f"the {strategy} test's summary")
    [path] = ui.results.glob(pattern)
    wait_until(lambda: f"{path}" in ui.log.read_text(), 10, "the log to name the summary")
    return dict(json.loads(path.read_text()))


def test_a_ui_test_leaves_the_users_keys_as_they_were_and_none_of_its_own(
    redis_server: EmbeddedRedis, client: Client, tmp_path: Path
):
    """A server holding keys of its own: a kept test's queue stays, the next test runs on a fresh
    name (its audit counts its own jobs only), and once it stops its keys are gone; every key the
    user had is as it was."""
    client.set("user:counter", 41)
    client.hset("user:profile", mapping={"name": "ada", "plan": "pro"})
    client.rpush("user:inbox", *[f"m{i}" for i in range(30)])
    client.zadd("user:scores", {f"p{i}": i for i in range(20)})
    client.set("user:session", "x", ex=3600)
    own = ["user:counter", "user:profile", "user:inbox", "user:scores", "user:session"]
    dumps = {key: client.dump(key) for key in own}
    before = client.dbsize()
    ui = LocustUI(redis_server.url, tmp_path / "results", tmp_path / "locust.log")
    try:
        kept = _ui_test(ui, "fused", keep=True)
        assert kept["settings"]["queue"] == ui.queue and kept["audit"]["ok"], kept["audit"]
        with_kept = client.dbsize()
        assert with_kept > before  # --keep-queue: the test's keys stay to inspect
        second = _ui_test(ui, "two_call", keep=False)
        # a fresh name: the kept queue's jobs are not this test's, and its audit does not count them
        assert second["settings"]["queue"] == f"{ui.queue}-2" and second["audit"]["ok"], second["audit"]
        wait_until(lambda: client.dbsize() == with_kept, 10, "the second test's keys to be deleted")
        assert "deleted the test's" in ui.log.read_text()
    finally:
        ui.stop()
    for key in client.scan_iter(match=f"*{{{ui.queue}}}*"):  # the kept test's, deleted by hand
        client.delete(key)
    assert client.dbsize() == before
    assert {key: client.dump(key) for key in own} == dumps
