"""open_run(): the one way a command makes a run folder, on the server redis_for_run gives it, fills
meta.json and closes it, so every run folder ends the same way: complete, interrupted, or failed
with a reason."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import redis

from bench.errors import BenchError, Interrupted, first_line
from bench.harness.calibration import calibrate
from bench.harness.cluster import EmbeddedCluster
from bench.harness.context import Progress, RunContext
from bench.harness.headroom import MemoryNeed, check_headroom, measure_need, memory_now
from bench.harness.machine import MachineCheck, check_machine
from bench.harness.profile import Profile
from bench.harness.progress import StagePlan
from bench.harness.provenance import write_provenance
from bench.harness.run_keys import check_left, earlier_left, key_scope
from bench.harness.server import EmbeddedRedis, ServerInfo, identify, inspect_server, node_settings
from bench.harness.terminal import table_width
from bench.harness.watch_scope import watch_scope
from bench.protocol.connection import RedisSettings, primaries, redact_url
from bench.protocol.keys import fresh_queue_name
from bench.protocol.queue import Queue
from bench.protocol.refusal import refused
from bench.results.files import make_run_dir, write_meta
from bench.results.meta import KeyRecord, RunMeta, read_meta


@contextmanager
def redis_for_run(
    env: Mapping[str, str] | None = None, cluster: bool = False
) -> Iterator[tuple[RedisSettings, ServerInfo]]:
    """The server a run talks to: REDIS_URL when set (checked; a cluster node makes every
    client a cluster client), else an embedded one (an embedded cluster with ``cluster``)."""
    env = os.environ if env is None else env
    if url := env.get("REDIS_URL", "").strip():
        settings = RedisSettings.from_url(url)
        version, masters = inspect_server(settings)
        settings = replace(settings, cluster=bool(masters))
        name, own = identify(node_settings(settings, masters[0].address) if masters else settings)
        yield settings, ServerInfo(redact_url(url), "REDIS_URL", None, version, masters, name, own)
        return
    if cluster:
        with EmbeddedCluster() as nodes:
            settings = RedisSettings.from_url(nodes.url, cluster=True)
            version, masters = inspect_server(settings)
            name, own = identify(node_settings(settings, masters[0].address))
            yield (
                settings,
                ServerInfo(nodes.url, nodes.nodes[0].source, nodes.binary, version, masters, name, own),
            )
        return
    with EmbeddedRedis() as server:
        settings = RedisSettings.from_url(server.url)
        name, own = identify(settings)
        yield settings, ServerInfo(server.url, server.source, server.binary, server.version(), (), name, own)


@dataclass
class OpenRun:
    """What the body of ``with open_run(...)`` gets: the context, and where to record progress."""

    ctx: RunContext
    stages_done: list[str] = field(default_factory=list)
    # the server's used_memory (and its peak) before and after each stage: meta.json's redis_memory
    memory: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def stage_started(self, stage: str) -> None:
        self._note_memory(stage, "before")

    def stage_done(self, stage: str) -> None:
        self.stages_done.append(stage)
        self._note_memory(stage, "after")
        write_meta(self.ctx.run_dir, RunMeta, stages_done=self.stages_done)

    def _note_memory(self, stage: str, when: str) -> None:
        with closing(self.ctx.settings.connect()) as client:
            try:  # one server's figures: on a cluster, the first master's (as the calibration's)
                self.memory.setdefault(stage, {})[when] = memory_now(primaries(client)[0][1])
            except redis.RedisError:
                return  # a server gone: the stage's own error says so
        write_meta(self.ctx.run_dir, RunMeta, redis_memory=self.memory)


def now() -> str:
    return dt.datetime.now().isoformat(timespec="seconds")


def mark_complete(run_dir: Path) -> None:
    """Every stage is done: the run is complete, finished now (the first time it is marked)."""
    meta = read_meta(run_dir)
    finished = meta.finished if meta.complete else None
    write_meta(run_dir, RunMeta, complete=True, reason=None, finished=finished or now())


def add_quiet_machine(parser: argparse.ArgumentParser) -> None:
    """``--quiet-machine``, the same for every command that opens a run folder."""
    parser.add_argument(
        "--quiet-machine",
        action="store_true",
        help="do not start when other work is using the CPU (for CI-like use)",
    )


def machine_before_run(quiet_machine: bool) -> MachineCheck:
    """A second's look at the machine before anything is measured; with --quiet-machine a busy
    machine is a one-line error, before any folder is made."""
    check = check_machine()
    if check.contended and quiet_machine:
        raise BenchError(f"the machine is not quiet ({check.culprits()}); --quiet-machine: not starting")
    return check


@contextmanager
def open_run(
    profile: Profile,
    stages: Iterable[str],
    results_root: Path,
    extra_scripts: Iterable[str] = (),
    progress: Progress | None = None,
    quiet_machine: bool = False,
    memory_check: bool = True,
) -> Iterator[OpenRun]:
    """Start the server (or check REDIS_URL: a bad one leaves no trace), make results/<run-id>/, and
    close it honestly: Ctrl-C marks it interrupted, a BenchError or a Redis failure incomplete."""
    planned = list(stages)
    progress = progress or Progress()
    run: OpenRun | None = None
    run_dir: Path | None = None
    reached: list[RedisSettings] = []  # the server, once checked: a refusal's line asks it for figures
    record: list[KeyRecord] = []  # the run's key prefixes, once recorded: its end counts what is left
    try:
        with redis_for_run(cluster=profile.cluster) as (settings, server):
            reached.append(settings)
            machine = machine_before_run(quiet_machine)
            own_server = server.binary is not None
            earlier = None if own_server else earlier_left(results_root, settings)
            run_dir = make_run_dir(profile.name, results_root)
            for said in (earlier, machine.warning(table_width() - len("warning: "))):
                if said:  # after the folder: an error about it stays the only line
                    print(f"warning: {said}", file=sys.stderr)
            write_meta(
                run_dir,
                RunMeta,
                run_id=run_dir.name,
                started=now(),
                complete=False,
                stages_planned=planned,
                stages_done=[],
            )
            with key_scope(run_dir, settings.url, own_server) as keys:
                record.append(keys)
                need = _memory_need(settings, server, profile, planned) if memory_check else None
                with closing(settings.connect()) as client:
                    shas = Queue.open(client, fresh_queue_name("meta"), tuple(extra_scripts)).scripts.shas()
                    # On a cluster, the first master's figures: one server's, as on a single one.
                    calibration = calibrate(primaries(client)[0][1])
                scope = watch_scope(settings, server)
                write_provenance(run_dir, profile, server, shas, scope, machine, calibration, need)
                ctx = RunContext(profile, settings, server, run_dir, progress, watch_pids=scope.extra_pids)
                run = OpenRun(ctx)
                yield run
                mark_complete(run_dir)
            if left := check_left(run_dir, settings, keys):
                print(f"warning: {left}", file=sys.stderr)
    except (KeyboardInterrupt, BenchError, redis.RedisError) as exc:
        run_dir, after = _settle(run_dir, run, reached, record)
        failure, reason = _failure(exc, run_dir, reached, progress.stage)
        if run_dir is not None:
            write_meta(run_dir, RunMeta, complete=False, reason=reason, finished=now())
        failure.after = after
        raise failure from None


def _failure(
    exc: BaseException, run_dir: Path | None, reached: list[RedisSettings], stage: str
) -> tuple[BenchError | Interrupted, str]:
    """The one-line error a run that ended early raises, and the reason its meta.json gives."""
    if isinstance(exc, KeyboardInterrupt):
        where = f"partial results in {run_dir}" if run_dir is not None else "nothing was written"
        return Interrupted(f"interrupted; {where}"), "interrupted (Ctrl-C)"
    if isinstance(exc, BenchError):
        return exc, str(exc)
    # A stage that met a server gone, restarted, too slow or refusing every call, and did not say
    # so itself. A refusal (OOM, READONLY, ...) says so, with the server's figures when it answers.
    if reached:
        with closing(reached[0].connect()) as client:
            refusal = refused(exc, reached[0].where, client)
        if refusal is not None:
            return refusal, str(refusal)
    reason = (
        f"Redis failed during {stage or 'set-up'}: {type(exc).__name__}: {first_line(exc, when_empty='')}"
    )
    where = f"; partial results in {run_dir}" if run_dir is not None else ""
    return BenchError(reason + where), reason


def _settle(
    run_dir: Path | None, run: OpenRun | None, reached: list[RedisSettings], record: list[KeyRecord]
) -> tuple[Path | None, str | None]:
    """A run that ended early: the line naming its keys left on the server (if any), and its folder.
    A run stopped in its set-up (a refusal, no room) that left no key goes without a trace: its
    folder is removed, and None is returned for it."""
    if run_dir is None or not reached or not record:
        return run_dir, None
    after = check_left(run_dir, reached[0], record[0])
    if run is None and after is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        return None, None
    return run_dir, after


def _memory_need(
    settings: RedisSettings, server: ServerInfo, profile: Profile, stages: list[str]
) -> MemoryNeed | None:
    """The run's memory need against the server's room (a run that cannot fit is one line, and no
    folder stays); None on a cluster: its masters' room is not one figure."""
    if server.is_cluster:
        return None
    with closing(settings.connect()) as client:
        need = measure_need(client, settings, profile, stages, embedded=server.binary is not None)
    check_headroom(need)
    return need


class Flags(Protocol):
    """A stage's flags (bench.harness.overrides.SectionFlags, which builds on this module)."""

    def parser(self, prog: str, description: str) -> argparse.ArgumentParser: ...
    def profile(self, args: argparse.Namespace) -> Profile: ...


class Stage(Protocol):
    """The face of every stage module (bench/stages/<id>/stage.py)."""

    def check_profile(self, profile: Profile, /) -> None: ...
    def point_seconds(self, profile: Profile, /) -> tuple[float, ...]: ...
    def run_stage(self, ctx: RunContext, /) -> None: ...


class AloneStage(Stage, Protocol):
    """A stage's module as `echomq-bench <id>` runs it alone; ``scripts_alone(profile)``, where it
    has one, names the scripts of its own it loads beyond the protocols'."""

    __name__: str
    ABOUT: str
    FLAGS: Flags


def run_alone(stage: AloneStage, argv: list[str]) -> Path:
    """`echomq-bench <stage>`: one stage alone, its settings (the profile's keys and its flags)
    checked before a server starts, into its own run folder; says where it is, and returns it."""
    id = stage.__name__.split(".")[-2]
    args = stage.FLAGS.parser(f"echomq-bench {id.replace('_', '-')}", stage.ABOUT).parse_args(argv)
    profile = stage.FLAGS.profile(args)
    stage.check_profile(profile)
    progress = Progress([StagePlan(id, stage.point_seconds(profile))], stage=id)
    scripts: Iterable[str] = getattr(stage, "scripts_alone", lambda _: ())(profile)
    with open_run(profile, [id], args.results, scripts, progress, args.quiet_machine) as run:
        stage.run_stage(run.ctx)
        run.ctx.progress.done()
        run.stage_done(id)
    print(f"results: {run.ctx.run_dir}")
    return run.ctx.run_dir
