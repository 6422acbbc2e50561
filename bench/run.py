"""`python -m bench run`: every stage of a profile against one server, into one run folder."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from bench.errors import BenchError
from bench.harness.calibration import calibrate
from bench.harness.context import Progress, RunContext
from bench.harness.machine import MachineCheck, check_machine
from bench.harness.meta import collect_meta
from bench.harness.profile import STAGES, Profile, load_profile
from bench.harness.server import redis_for_run
from bench.protocol.queue import Queue
from bench.results import RESULTS_DIR, make_run_dir, update_meta

# Each stage is a module with run_stage(ctx: RunContext) -> None.
STAGE_MODULES = {
    "finish_fetch": "bench.finish_fetch.stage",
    "sweep": "bench.sweep_cost.stage",
    "race": "bench.race.stage",
    "report": "bench.report.markdown",
}


def stage_runner(stage: str, profile: Profile) -> Callable[[RunContext], None]:
    """The stage's run_stage, after its optional check_profile(profile) passed.

    Every stage checks its settings before the first one starts, so a bad
    value in the last stage's keys fails the run at once, not minutes in.
    """
    module = importlib.import_module(STAGE_MODULES[stage])
    check = getattr(module, "check_profile", None)
    if check is not None:
        check(profile)
    runner: Callable[[RunContext], None] = module.run_stage
    return runner


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench run", description=__doc__)
    parser.add_argument("--profile", default="default", help="profiles/<name>.conf, or a path")
    parser.add_argument(
        "--stages",
        default=None,
        help=f"comma-separated, from {', '.join(STAGES)} (default: the profile's)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders go")
    parser.add_argument(
        "--quiet-machine",
        action="store_true",
        help="do not start when other work is using the CPU (for CI-like use)",
    )
    return parser.parse_args(argv)


def machine_before_run(quiet_machine: bool) -> MachineCheck:
    """A second's look at the machine before anything is measured; with --quiet-machine a busy
    machine is a one-line error, before any folder is made."""
    check = check_machine()
    if check.contended and quiet_machine:
        raise BenchError(f"the machine is not quiet ({check.culprits()}); --quiet-machine: not starting")
    return check


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    profile = load_profile(args.profile)
    stages = profile.stages
    if args.stages:
        stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
        for stage in stages:
            if stage not in STAGES:
                raise BenchError(f"unknown stage {stage!r}; use some of {', '.join(STAGES)}")
    # Everything is checked before the server starts and the folder is made.
    runners = {stage: stage_runner(stage, profile) for stage in stages}
    progress = Progress()
    done: list[str] = []
    run_dir: Path | None = None
    try:
        # The server is checked before anything is written, so a bad REDIS_URL leaves no trace.
        with redis_for_run() as (settings, server):
            machine = machine_before_run(args.quiet_machine)
            run_dir = make_run_dir(profile.name, args.results)
            if machine.warning():  # after the folder: an error about it stays the only line
                print(f"warning: {machine.warning()}", file=sys.stderr)
            started = dt.datetime.now().isoformat(timespec="seconds")
            update_meta(
                run_dir,
                run_id=run_dir.name,
                started=started,
                complete=False,
                stages_planned=list(stages),
                stages_done=[],
            )
            client = settings.connect()
            try:
                probe = Queue.open(client, f"meta-{uuid.uuid4().hex[:8]}")
                shas = probe.scripts.shas()
                calibration = calibrate(client)
            finally:
                client.close()
            update_meta(
                run_dir,
                **collect_meta(profile.name, server, shas),
                machine_before=machine.as_meta(),
                calibration=calibration.as_meta(),
            )
            ctx = RunContext(profile, settings, server, run_dir, progress)
            for stage, runner in runners.items():
                progress.stage = stage
                progress("starting")
                runner(ctx)
                progress.done()
                done.append(stage)
                update_meta(run_dir, stages_done=done)
    except KeyboardInterrupt:
        if run_dir is not None:
            update_meta(run_dir, complete=False, reason="interrupted (Ctrl-C)", stages_done=done)
        where = f"partial results in {run_dir}" if run_dir is not None else "nothing was written"
        print(f"echomq-bench: interrupted; {where}", file=sys.stderr)
        return 130
    except BenchError as exc:
        if run_dir is not None:
            update_meta(run_dir, complete=False, reason=str(exc), stages_done=done)
        raise
    except redis.RedisError as exc:
        # A stage that met a server gone, restarted or too slow, and did not say so itself:
        # still one line, and the run folder says it is incomplete.
        first = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else ""
        reason = f"Redis failed during {progress.stage or 'set-up'}: {type(exc).__name__}: {first}"
        if run_dir is not None:
            update_meta(run_dir, complete=False, reason=reason, stages_done=done)
        where = f"; partial results in {run_dir}" if run_dir is not None else ""
        raise BenchError(reason + where) from None
    finished = dt.datetime.now().isoformat(timespec="seconds")
    update_meta(run_dir, complete=True, reason=None, finished=finished)
    print(f"results: {run_dir}")
    return 0
