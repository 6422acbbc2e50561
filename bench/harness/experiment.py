"""A diagnosis in experiments/ as a run: results/<run-id>/ with meta.json and its output as CSV.
Not a stage, but a figure it gives is cited like a stage's, so it is watched and recorded like one,
and `echomq-bench publish` publishes it like any other run."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import invocation
from bench.errors import BenchError
from bench.harness.machine import MachineSample, watch_run
from bench.harness.provenance import code_record, machine_record
from bench.harness.run_folder import machine_before_run, now
from bench.harness.server import server_identity
from bench.protocol.connection import Client, primaries
from bench.protocol.keys import NAMESPACES
from bench.results.files import make_run_dir, write_csv, write_meta
from bench.results.meta import KeyRecord, RunMeta

QUIET_FLAG = "--quiet-machine"
EXPERIMENT_PROFILE = "experiment"  # meta.json's profile: the results page never heads the README with it


@dataclass
class Experiment:
    """What the body of ``with experiment_run(...)`` gets: its arguments and where its rows go."""

    name: str
    run_dir: Path
    args: list[str]  # the command line's words after the script, without --quiet-machine
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def row(self, table: str = "", **values: Any) -> None:
        """One row of a CSV (``<name>.csv``, or ``<name>_<table>.csv``): a dict, the CSV's edge."""
        self.tables.setdefault(table, []).append(values)

    def record_server(self, client: Client) -> None:
        """The experiment's own embedded Redis, into meta.json: every key there is its, none outlives it."""
        info = client.info("server")
        ((where, _),) = primaries(client)
        name, own = server_identity(info)
        write_meta(
            self.run_dir,
            RunMeta,
            keys=KeyRecord(url=f"redis://{where}/0", own_server=True, prefixes=[f"{n}:" for n in NAMESPACES]),
            server_name=name,
            server_version=own,
            redis_version=info.get("redis_version"),
            redis_source="embedded",
        )

    def write(self, watch: MachineSample) -> None:
        """Each table as a CSV whose rows end with the machine watch's columns."""
        for table, rows in self.tables.items():
            path = self.run_dir / (f"{self.name}_{table}.csv" if table else f"{self.name}.csv")
            columns = list(dict.fromkeys(key for row in rows for key in row))
            full = [{**dict.fromkeys(columns, ""), **row, **watch.row_fields()} for row in rows]
            write_csv(path, [*columns, *watch.row_fields()], full)


@contextmanager
def experiment_run(name: str, argv: Sequence[str], results_root: Path | None = None) -> Iterator[Experiment]:
    """results/<date-time>-<name>/ for the experiment ``name`` run with ``argv`` (its words after the
    script, --quiet-machine as `echomq-bench run` has it), the machine watched while the body runs."""
    args = [word for word in argv if word != QUIET_FLAG]
    check = machine_before_run(QUIET_FLAG in argv)
    if warning := check.warning():
        print(f"warning: {warning}", file=sys.stderr)
    run_dir = make_run_dir(name, results_root)
    invocation.typed([".venv/bin/python", f"experiments/{name}.py", *argv])
    write_meta(
        run_dir,
        RunMeta,
        run_id=run_dir.name,
        profile=EXPERIMENT_PROFILE,
        experiment=name,
        command=invocation.command(),
        started=now(),
        complete=False,
        **code_record(),
        **machine_record(),
        machine_before=check.as_meta(),
        machine_watch="this process and its children (the embedded redis-server)",
    )
    experiment = Experiment(name, run_dir, args)
    watch = watch_run().start()
    try:
        yield experiment
    except BaseException as exc:
        watch.stop()
        reason = (
            "interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        )
        write_meta(run_dir, RunMeta, complete=False, reason=reason, finished=now())
        raise
    sample = watch.stop()
    if not experiment.tables:
        write_meta(run_dir, RunMeta, complete=False, reason="no rows written", finished=now())
        raise BenchError(f"experiment {name} wrote no rows; {run_dir} holds its meta.json only")
    experiment.write(sample)
    write_meta(run_dir, RunMeta, complete=True, reason=None, finished=now(), stages_done=[name])
    print(f"results: {run_dir}")
