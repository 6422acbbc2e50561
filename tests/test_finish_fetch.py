"""Finish-then-fetch under Locust, against the real redis-server: short headless runs."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.harness.context import RunContext
from bench.harness.profile import PROFILES_DIR, FinishFetchOptions, Profile
from bench.harness.server import EmbeddedRedis, ServerInfo
from bench.paths import LOCUSTFILE, REPO
from bench.protocol.connection import Client, RedisSettings
from bench.protocol.queue import STRATEGIES, Queue
from bench.results import hdr
from bench.results.files import FIDELITY_DIR, HDR_DIR, LOCUST_DIR, RAW_DIR
from bench.results.finish_fetch import FinishFetchRow
from bench.results.rows import columns_of
from bench.stages.finish_fetch.in_locust.sleep import prompt_stop
from bench.stages.finish_fetch.loadstats import Aggregate, Recorder, server_figures
from bench.stages.finish_fetch.locust_trial import run_trial
from bench.stages.finish_fetch.pace import closed_limit
from bench.stages.finish_fetch.plan import Point, regime_options
from bench.stages.finish_fetch.raw import run_raw
from bench.stages.finish_fetch.reference import reference_jobs
from bench.stages.finish_fetch.stage import run_stage
from bench.stages.finish_fetch.summary import (
    SUMMARY_KIND,
    UNMEASURED_KEYS,
    Derived,
    ServerFigures,
    SummaryAudit,
    TrialSummary,
    build_summary,
    unmeasured_summary,
)
from bench.stages.finish_fetch.table import TableRow, table
from bench.stages.finish_fetch.trial_settings import TrialSettings
from tests.helpers import LOCUST_LOADS, ForkedCommands, finish_fetch_row

# Short runs: hundreds of jobs a window at least, on a loaded machine; the tests count, never time.
QUICK = FinishFetchOptions(
    repetitions=1, workers=(2,), rtt_ms=(0.0,), batch_size=20, payload_bytes=20, warmup_s=0.1, measure_s=0.5,
    fidelity_calls=200,
)  # fmt: skip


@pytest.mark.locust
@pytest.mark.slow
def test_the_stage_runs_every_strategy_and_writes_every_file(
    tmp_path: Path,
    settings: RedisSettings,
    redis_server: EmbeddedRedis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    server = ServerInfo(redis_server.url, redis_server.source, redis_server.binary, redis_server.version())
    elsewhere = tmp_path / "results-dir"  # where a direct Locust run would make a folder of its own
    monkeypatch.setenv("EMQ_RESULTS_DIR", str(elsewhere))
    run_stage(RunContext(Profile("quick", finish_fetch=QUICK), settings, server, tmp_path))
    assert not elsewhere.exists()  # a trial's files are in the run's folder, none in results/

    with (tmp_path / "finish_fetch.csv").open() as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == columns_of(FinishFetchRow)
        rows = {row["strategy"]: row for row in reader}
    assert set(rows) == {"fused", "two_call", "two_call_pipelined"}
    for variant, row in rows.items():
        assert all(row[c] != "" for c in columns_of(FinishFetchRow) if c != "load"), row  # load: open only
        assert int(row["jobs"]) > 100, row
        assert row["audit_ok"] == "True", row
        for metric in ("cycle", "e2e"):
            assert (tmp_path / HDR_DIR / f"finish_fetch__{variant}-w2-rtt0__r1__{metric}.hdr").is_file()
        prefix = tmp_path / LOCUST_DIR / f"{variant}-w2-rtt0__r1"
        for suffix in ("_stats.csv", "_stats_history.csv", "_summary.json"):
            assert Path(f"{prefix}{suffix}").is_file()
    # Round trips per job, counted at the client: the first fetch and idle waits add a little.
    assert 0.95 <= float(rows["fused"]["round_trips_per_job"]) <= 1.2
    assert 1.95 <= float(rows["two_call"]["round_trips_per_job"]) <= 2.3
    # two_call_pipelined: one exchange a job at concurrency 1, carrying two commands
    assert 0.95 <= float(rows["two_call_pipelined"]["round_trips_per_job"]) <= 1.2
    backlog = Point(workers=2, rtt_ms=0.0, concurrency=1)  # the stage's one point
    for strategy, commands in (("fused", 1), ("two_call", 2), ("two_call_pipelined", 2)):
        assert abs(float(rows[strategy]["commands_per_job"]) - commands) <= 0.02, rows[strategy]
        assert abs(float(rows[strategy]["raw_commands_per_job"]) - commands) <= 0.02, rows[strategy]
        trial = TrialSettings.at(regime_options(QUICK, backlog), strategy, backlog, "")
        edges = server_edges(trial, int(rows[strategy]["jobs"]), commands)
        assert abs(float(rows[strategy]["server_commands_per_job"]) - commands) <= edges, rows[strategy]
    for suffix in ("fused-w2-rtt0", "two_call-w2-rtt0", "two_call_pipelined-w2-rtt0"):
        assert (tmp_path / RAW_DIR / f"{suffix}_summary.json").is_file()
        assert json.loads((tmp_path / RAW_DIR / f"{suffix}_summary.json").read_text())["audit"]["ok"]
        # the reference at the same point: its own queue drained, audited, beside the drivers
        reference = json.loads((tmp_path / RAW_DIR / f"{suffix}_reference.json").read_text())
        assert reference["audit_ok"] and 0 < reference["jobs"] <= reference_jobs(QUICK.measure_s)
    # one job in flight a worker: a pipeline a job fused, two two_call, and each worker's first
    # fetch (counted, not a share: a loaded machine drains fewer jobs in the reference's window)
    for strategy, trips in (("fused", 1), ("two_call", 2), ("two_call_pipelined", 1)):
        reference = json.loads((tmp_path / RAW_DIR / f"{strategy}-w2-rtt0_reference.json").read_text())
        pipelines = round(reference["round_trips_per_job"] * reference["jobs"])
        assert trips * reference["jobs"] <= pipelines <= trips * reference["jobs"] + 2, reference
        assert float(rows[strategy]["reference_round_trips_per_job"]) > 0
        assert float(rows[strategy]["raw_reference_cpu_ratio"]) > 0
    table = capsys.readouterr().out
    assert "fused/two_call " in table and "fused/two_call_pipelined" in table and "jobs/s" in table
    assert "latency fidelity" in table and "bare redis-py" in table
    fidelity = json.loads((tmp_path / "meta.json").read_text())["finish_fetch"]["fidelity"]
    for way in ("redis_py_p50_us", "raw_path_p50_us", "locust_path_p50_us"):
        assert fidelity[way] > 0, fidelity
    # redis-benchmark (Debian's redis-tools) is beside redis-server here; without it the note says so
    assert fidelity["redis_benchmark_p50_us"] or fidelity["redis_benchmark_note"].startswith("skipped")
    assert (tmp_path / FIDELITY_DIR / "probe_summary.json").is_file()


# What every run counts, Locust's or the raw driver's.
COUNTED = {
    "jobs", "jobs_added", "worker_round_trips", "worker_commands", "worker_script_calls",
    "producer_round_trips", "producer_script_calls", "producer_calls", "in_flight_samples",
    "in_flight_sum", "cpu_us", "window_us",
}  # fmt: skip


def _raw_settings(opts: FinishFetchOptions, strategy: str, point: Point) -> TrialSettings:
    return TrialSettings(
        strategy=strategy, workers=point.workers, producers=opts.producers, batch_size=opts.batch_size,
        payload_bytes=opts.payload_bytes, target_rate=opts.target_rate, warmup_s=opts.warmup_s,
        measure_s=opts.measure_s, rtt_ms=point.rtt_ms, queue="", concurrency=point.concurrency,
        job_ms=point.job_ms,
    )  # fmt: skip


def server_edges(trial: TrialSettings, jobs: int, per_job: int) -> float:
    """How far commandstats's commands a job may be from the client's, by structure, not timing.

    commandstats is read next to the counters (server_figures), but at each edge what each
    connection had in flight, and one more exchange woken before INFO's reply had its turn, falls
    between the two. The producers' batches count too (their calls are taken off the server's): in
    the backlog regime, 3 producers of 200 jobs a batch. A fused job sent as two calls would still
    be off by a whole one over the thousands of jobs a window holds.
    """
    in_flight = trial.producers * trial.batch_size + trial.workers * trial.concurrency * per_job
    return 2 * 2 * in_flight / jobs


def _check_counts(summary: TrialSummary, strategy: str, point: Point) -> None:
    """Commands a job exact, at the client and by commandstats; several calls an exchange."""
    d = summary.figures
    per_job = 1 if strategy == "fused" else 2
    jobs = d.jobs
    # At each edge of the window at most one exchange of each connection straddles it.
    client_edges = 2 * point.concurrency * per_job / jobs
    edges = server_edges(summary.settings, jobs, per_job)
    assert abs(d.commands_per_job - per_job) <= client_edges, d
    assert d.server_commands_per_job is not None
    assert abs(d.server_commands_per_job - per_job) <= edges, d
    assert d.round_trips_per_job < 0.75 * per_job, d  # a flush carried several jobs' calls
    assert d.calls_per_flush > 1.3, d
    assert d.jobs_in_flight_mean > 1, d


def test_a_window_edge_reads_commandstats_last_next_to_the_counters(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read before it, INFO memory left its wait between commandstats and the counters' freeze: on a
    busy machine 2,000 producer calls fell there, and a worker's commands a job read -3.2."""
    sections: list[str] = []
    real = client.info

    def info(section: str, *args: Any, **kwargs: Any) -> Any:
        sections.append(section)
        return real(section, *args, **kwargs)

    monkeypatch.setattr(client, "info", info)
    stats, cpu, memory = server_figures(client)
    assert sections[-1] == "commandstats" and {"cpu", "memory"} <= set(sections), sections
    assert stats and cpu > 0 and memory > 0


@pytest.mark.locust
@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_eight_jobs_in_flight_on_one_worker_share_round_trips_and_both_drivers_count_alike(
    tmp_path: Path, settings: RedisSettings, strategy: str
):
    point = Point(workers=1, rtt_ms=0.0, concurrency=8)
    run = run_trial(settings, QUICK, strategy, point, 1, tmp_path)
    assert run.audit.ok, run.audit.verdict
    assert run.summary.settings.concurrency == 8
    _check_counts(run.summary, strategy, point)
    raw = run_raw(settings, _raw_settings(QUICK, strategy, point))
    assert raw.audit is not None and raw.audit.ok, raw.audit
    _check_counts(raw, strategy, point)
    # the raw driver's window edges wait for every thread's step: the server saw exactly its calls
    assert raw.figures.server_commands_per_job == raw.figures.commands_per_job, raw.counters
    # the same loops count the same things, whoever drives them
    assert raw.derived is not None and run.summary.derived is not None
    for summary in (raw, run.summary):
        assert set(summary.counters) >= COUNTED, summary.counters


@pytest.mark.locust
@pytest.mark.slow
def test_job_ms_is_held_without_blocking_the_other_jobs_in_flight(tmp_path: Path, settings: RedisSettings):
    point = Point(workers=1, rtt_ms=0.0, concurrency=4, job_ms=20.0)
    run = run_trial(settings, QUICK, "fused", point, 1, tmp_path)
    assert run.audit.ok, run.audit.verdict
    d = run.summary.figures
    cycle = hdr.decode(run.summary.histograms["cycle"])
    assert cycle.get_min_value() >= 0.95 * 20_000  # every job was held its 20 ms
    # Four slots each hold a job: counted as each starts, the others are holding theirs.
    assert d.jobs_in_flight_mean >= 3, d
    # Overlap shows in the rate too, however slow the machine makes each cycle: by Little's law the
    # cycles recorded, over the span the process recorded them in, are the jobs held at once: past
    # one slot's, never past four. A slot's cycles follow one another, so those ending in the span
    # cover it and at most one cycle begun before it: the edge is the longest cycle, not a guess.
    span_us = run.summary.counters["window_us"]
    held_at_once = d.jobs * cycle.get_mean_value() / span_us
    edge = cycle.get_max_value() / span_us
    # (With every cycle at least its 20 ms, this also holds the rate to four slots' 200 jobs/s.)
    assert 1.4 < held_at_once <= 4 * (1 + edge) * 1.01, (held_at_once, edge, d)  # 1%: hdr's buckets
    # Job time is the largest share; whether it reaches 70% is the machine's doing (65% on a slow
    # VM: 129 of 200 jobs/s), so the verdict is held to the rule on the measured shares.
    assert max(d.pace_shares, key=d.pace_shares.__getitem__) == "job time", d.pace_shares
    assert (d.limit, d.limit_share) == closed_limit(d.pace_shares, d.fetches_alone_per_job), d


@pytest.mark.locust
@pytest.mark.slow
def test_the_simulated_rtt_is_paid_once_an_exchange(tmp_path: Path, settings: RedisSettings):
    point = Point(workers=1, rtt_ms=2.0, concurrency=8)
    run = run_trial(settings, QUICK, "fused", point, 1, tmp_path)
    assert run.audit.ok, run.audit.verdict
    c = run.summary.counters
    assert c["rtt_sleeps"] == c["worker_round_trips"] + c["producer_round_trips"]
    assert c["worker_round_trips"] < 0.75 * c["jobs"]  # fewer waits than jobs: flushes carried several


@pytest.mark.locust
@pytest.mark.slow
def test_two_processes_merge_their_histograms_exactly(tmp_path: Path, settings: RedisSettings):
    # a longer warm-up: two worker processes must start and connect before the window opens
    opts = dataclasses.replace(QUICK, loadgen_processes=2, producers=1, warmup_s=1.0)
    run = run_trial(settings, opts, "fused", Point(workers=3, rtt_ms=0.0), 1, tmp_path)
    summary = run.summary
    assert summary.mode == "distributed" and summary.complete, summary.missing_processes
    parts = [p["counts"].get("cycle", 0) for p in summary.processes]
    assert sum(1 for n in parts if n > 0) == 2, summary.processes  # both processes ran workers
    merged = hdr.decode(summary.histograms["cycle"]).get_total_count()
    assert merged == sum(parts) == summary.counters["jobs"] > 0
    assert run.audit.ok, run.audit.verdict


def test_the_master_stops_promptly_but_counts_heartbeats_as_locust_does():
    slept: list[float] = []
    module = SimpleNamespace(gevent=SimpleNamespace(sleep=slept.append))

    def stop() -> None:  # named as Locust's runners name their waits
        module.gevent.sleep(1)

    def quit() -> None:
        module.gevent.sleep(0.5)

    def heartbeat_worker() -> None:  # its ticks count a worker missing: never cut
        module.gevent.sleep(1)

    prompt_stop(module, 0.02)
    prompt_stop(module, 0.02)  # once: a second call wraps nothing again
    for wait in (stop, quit, heartbeat_worker):
        wait()
    assert slept == [0.02, 0.02, 1]
    # the waits it cuts are still Locust's (read, not imported: Locust patches this process)
    spec = importlib.util.find_spec("locust")
    assert spec is not None and spec.submodule_search_locations
    runners = (Path(spec.submodule_search_locations[0]) / "runners.py").read_text()
    master = runners[runners.index("class MasterRunner") : runners.index("class WorkerRunner")]
    stops = master[master.index("    def stop(") : master.index("    def quit(")]
    assert "gevent.sleep(1)" in stops and "gevent.sleep(0.5)" in master[master.index("    def quit(") :]


@pytest.mark.locust
@pytest.mark.slow
def test_open_loop_at_an_unreachable_rate_is_marked_saturated(tmp_path: Path, settings: RedisSettings):
    opts = dataclasses.replace(QUICK, target_rate=10_000_000.0)  # a flag, not a rate
    run = run_trial(settings, opts, "two_call", Point(workers=1, rtt_ms=0.0), 1, tmp_path)
    derived = run.summary.figures
    assert derived.saturated, derived
    assert any("offered" in reason for reason in derived.saturated_because)
    assert derived.added_per_s < 10_000_000.0 * 0.9
    assert run.audit.ok, run.audit.verdict


@pytest.mark.locust
@pytest.mark.slow
def test_a_run_that_ends_during_warm_up_writes_a_summary_that_says_so(
    tmp_path: Path, settings: RedisSettings, queue: Queue, locust_forks: ForkedCommands
):
    summary_path = tmp_path / "summary.json"
    command = ["-f", str(LOCUSTFILE), "--headless", "--only-summary"]
    command += ["--warmup-s", "60", "--run-time", "1s", "--summary-json", str(summary_path)]
    command += ["--queue", queue.keys.name, "--redis-url", settings.url]  # the fixture deletes its keys
    done = locust_forks.run(command)
    assert done.returncode == 0, done.stderr
    summary = json.loads(summary_path.read_text())
    assert summary["measured"] is False and summary["complete"] is False, summary
    assert summary["aborted"] == "the test stopped during warm-up"
    assert summary["settings"]["warmup_s"] == 60


def test_a_window_drops_deltas_sent_before_its_reset_and_merges_the_rest_exactly():
    early, late = Recorder(), Recorder()
    early.reset(epoch=1)
    early.record("cycle", 100)
    stale = early.take()
    for recorder in (early, late):
        recorder.reset(epoch=2)
    for value in (50, 60, 70):
        early.record("cycle", value)
    late.record("cycle", 80)
    aggregate = Aggregate()
    aggregate.reset(epoch=2)
    assert not aggregate.absorb("a", "worker", stale)
    assert aggregate.absorb("a", "worker", early.take()) and aggregate.absorb("b", "worker", late.take())
    assert aggregate.histograms["cycle"].get_total_count() == 4 and aggregate.stale_reports == 1
    assert aggregate.processes["a"].counts["cycle"] == 3


def _one_line_error(result: subprocess.CompletedProcess[str], marker: str, *words: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0
    assert len(lines) == 1 and marker in lines[0], result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_an_unknown_strategy_in_a_profile_is_a_one_line_error(tmp_path: Path):
    conf = tmp_path / "bad.conf"
    conf.write_text("strategies = fused, sideways\n")
    result = subprocess.run(
        [sys.executable, "-m", "bench", "run", "--profile", str(conf), "--results", str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    _one_line_error(result, "echomq-bench: error:", "sideways")
    assert not (tmp_path / "out").exists()  # checked before any folder is made


BAD_OPTIONS = [
    ("--strategy", "sideways", ("--strategy", "sideways")),
    ("--workers", "two", ("--workers", "whole number")),
    ("--concurrency", "0", ("--concurrency", "below its minimum 1")),
    ("--job-ms", "-1", ("--job-ms", "below its minimum 0")),
]
PROFILE_CONFS = sorted(PROFILES_DIR.glob("*.conf"))


@pytest.fixture(scope="module")
def locust_forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkedCommands]:
    """`python -m locust`, each command a fork of one process that loaded Locust once: each alone is
    a second of Python and Locust imports."""
    with ForkedCommands("locust", LOCUST_LOADS, tmp_path_factory.mktemp("locust-forks"), REPO) as locust:
        yield locust


@pytest.fixture(scope="module")
def locust_lists(locust_forks: ForkedCommands) -> dict[tuple[str, ...], subprocess.CompletedProcess[str]]:
    """`locust -f bench/locustfile.py <options> --list` for each bad option and each profile."""
    options = [(option, value) for option, value, _ in BAD_OPTIONS]
    options += [("--config", str(conf)) for conf in PROFILE_CONFS]
    done = [locust_forks.run(["-f", str(LOCUSTFILE), *extra, "--list"]) for extra in options]
    return dict(zip(options, done, strict=True))


@pytest.mark.locust
@pytest.mark.slow  # the first test of the two pays for locust_lists
@pytest.mark.parametrize(("option", "value", "words"), BAD_OPTIONS)
def test_a_bad_locust_option_is_a_one_line_error(
    locust_lists: dict[tuple[str, ...], subprocess.CompletedProcess[str]],
    option: str,
    value: str,
    words: tuple[str, ...],
):
    result = locust_lists[(option, value)]
    _one_line_error(result, "error: argument", *words)  # argparse names the program after its entry


@pytest.mark.locust
@pytest.mark.slow
def test_locust_accepts_every_key_of_every_profile(
    locust_lists: dict[tuple[str, ...], subprocess.CompletedProcess[str]],
):
    assert len(PROFILE_CONFS) >= 4  # smoke, default, stress, cluster
    for conf in PROFILE_CONFS:
        result = locust_lists[("--config", str(conf))]
        assert result.returncode == 0, f"{conf.name}: {result.stderr}"
        assert "WorkerUser" in result.stdout and "ProducerUser" in result.stdout


def test_the_table_shows_medians_and_pairs_each_a_b_round_into_a_ratio():
    base = finish_fetch_row()

    def run(variant: str, rep: int, jobs_per_s: float) -> TableRow:
        row = dataclasses.replace(base, strategy=variant, rep=rep, jobs_per_s=jobs_per_s)
        return TableRow(row, rtt_slept_ms=0.0, loadgen_cpu_us_per_job=30.0)

    rounds = [
        run("fused", 1, 200.0),
        run("two_call", 1, 100.0),
        run("fused", 2, 300.0),
        run("two_call", 2, 100.0),
    ]
    lines = table(rounds, ["fused", "two_call"]).splitlines()
    (jobs,) = [line for line in lines if line.split()[:1] == ["jobs/s"]]
    assert jobs.split()[1:] == ["250", "[200-300]", "100", "[100-100]", "2.50", "[2.00-3.00]"]
    (audit,) = [line for line in lines if line.split()[:1] == ["audit"]]
    assert audit.split()[1:] == ["ok", "2/2", "ok", "2/2"]
    (clean,) = [line for line in lines if line.split()[:1] == ["clean"]]
    assert clean.split()[1:] == ["2", "of", "2", "2", "of", "2"] and "CONTENDED" not in "\n".join(lines)
    # A run beside other work: left out of its cell's figures, counted, and said under the table.
    busy = dataclasses.replace(rounds[2].row, contended=True, foreign_cpu_pct=93.0)
    marked = table([*rounds[:2], dataclasses.replace(rounds[2], row=busy), rounds[3]], ["fused", "two_call"])
    (clean,) = [line for line in marked.splitlines() if line.split()[:1] == ["clean"]]
    assert clean.split()[1:] == ["1", "of", "2", "2", "of", "2"]
    (jobs,) = [line for line in marked.splitlines() if line.split()[:1] == ["jobs/s"]]
    assert jobs.split()[1:3] == ["200", "100"]  # fused: its clean window alone, unmarked
    assert "CONTENDED: 1 of 4 runs" in marked and "93% of a core" in marked
    # A saturated window is not clean (the glossary's word), but its cell still rests on it, marked s.
    full = dataclasses.replace(rounds[2].row, saturated=True)
    marked = table([*rounds[:2], dataclasses.replace(rounds[2], row=full), rounds[3]], ["fused", "two_call"])
    (clean,) = [line for line in marked.splitlines() if line.split()[:1] == ["clean"]]
    assert clean.split()[1:] == ["1", "of", "2", "2", "of", "2"]
    (jobs,) = [line for line in marked.splitlines() if line.split()[:1] == ["jobs/s"]]
    assert jobs.split()[1:4] == ["250", "[200-300]", "s"]
    # A repetition one strategy lacks pairs with nothing: the other rounds keep their pairs.
    cut = table([rounds[0], rounds[2], rounds[3]], ["fused", "two_call"])  # two_call rep 1 lost
    (jobs,) = [line for line in cut.splitlines() if line.split()[:1] == ["jobs/s"]]
    assert jobs.split()[-1] == "3.00"  # round 2 alone; not fused rep 1 against two_call rep 2
    point = next(i for i, line in enumerate(lines) if line.startswith("steady, workers 2, rtt 0 ms*"))
    assert lines[point + 1].split() == ["fused", "two_call", "fused/two_call"]  # the point's columns
    for width in (100, 80):
        assert max(map(len, table(rounds, ["fused", "two_call"], width).splitlines())) <= width


def test_with_three_strategies_the_ratios_get_a_table_of_their_own_below_each_block():
    base = finish_fetch_row(
        rtt_ms=1.0, round_trips_per_job=0.25, concurrency=8, commands_per_job=1.0, limit="client"
    )
    runs = [
        TableRow(dataclasses.replace(base, strategy=s, rep=rep, jobs_per_s=j * rep), 1.05, 30.0)
        for rep in (1, 2)
        for s, j in (("fused", 400.0), ("two_call", 200.0), ("two_call_pipelined", 100.0))
    ]
    strategies = ["fused", "two_call", "two_call_pipelined"]
    lines = table(runs, strategies, notes=["a note"]).splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("steady, workers 2, rtt 1 ms*"))
    assert lines[heading] == "steady, workers 2, rtt 1 ms*, 8 jobs in flight each (slept 1.05)"
    assert lines[heading + 1].split() == strategies  # the strategies' own table
    (ratios,) = [
        i for i, line in enumerate(lines) if line.split() == ["fused/two_call", "fused/two_call_pipelined"]
    ]
    jobs = next(line for line in lines[ratios:] if line.split()[:1] == ["jobs/s"])
    assert jobs.split()[1:] == ["2.00", "[2.00-2.00]", "4.00", "[4.00-4.00]"]
    limit = next(line for line in lines if line.split()[:1] == ["limit"])
    assert limit.split()[1:] == ["client"] * 3
    assert lines[-1] == "a note"
    for width in (100, 80):
        assert max(map(len, table(runs, strategies, width).splitlines())) <= width


def test_the_run_summary_crosses_its_json_edge_whole():
    """What the Locust child writes is what the stage reads back, key for key, by attribute."""
    run = _raw_settings(QUICK, "fused", Point(1, 0.0))
    aggregate = Aggregate()
    aggregate.reset(1)
    audit = SummaryAudit(True, "ok", {"completed": 0})
    summary = build_summary(run, aggregate, 1.0, "local", ServerFigures(), audit=audit)
    data = json.loads(json.dumps(summary.to_json()))
    assert TrialSummary.from_json(data) == summary
    assert set(data["derived"]) == {f.name for f in dataclasses.fields(Derived)}
    assert data["settings"] == run.as_dict() and data["kind"] == SUMMARY_KIND
    unaudited = dataclasses.replace(summary, audit=SummaryAudit(False, "not audited: Redis unreachable"))
    assert unaudited.to_json()["audit"] == {"ok": False, "verdict": "not audited: Redis unreachable"}
    assert TrialSummary.from_json(unaudited.to_json()) == unaudited
    stopped = unmeasured_summary(run, "local", None)
    assert list(stopped.to_json()) == list(UNMEASURED_KEYS)  # no figures where nothing was measured
    assert TrialSummary.from_json(stopped.to_json()) == stopped
