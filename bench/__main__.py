"""`echomq-bench <command>` (or `python -m bench <command>`): run, report, compare, runs, sweep, race,
finish-fetch, bullmq-worker, script-cost, instructions, predict, publish, clean."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from bench import invocation
from bench.errors import BenchError, Interrupted
from bench.results.stages import STAGES

# command -> (module, function, one-line help). Each function takes argv, returns an exit code; a
# stage without one runs alone (bench.harness.run_folder.run_alone).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("bench.run", "main", "run a profile's stages and write results/<run-id>/"),
    "report": ("bench.report.cli", "report_main", "write report.md and plots for a run"),
    "compare": ("bench.report.cli", "compare_main", "compare two runs metric by metric"),
    "learn": ("bench.report.cli", "learn_main", "learn compare's thresholds from A/A pairs of runs"),
    "runs": ("bench.report.cli", "runs_main", "list the runs in results/"),
    **{s.id.replace("_", "-"): (s.module, "main", s.help) for s in sorted(STAGES, key=lambda s: s.order)},
    "predict": ("bench.report.predict", "predict_main", "jobs/s a run's model predicts at other points"),
    "publish": ("bench.report.cli", "publish_main", "copy a run into docs/results/; --page: the page"),
    "clean": ("bench.harness.run_keys", "clean_main", "remove the keys a run left on its server"),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print("usage: echomq-bench <command> [options]\n\ncommands:")
        print("\n".join(f"  {name:<13} {text}" for name, (_, _, text) in COMMANDS.items()))
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(
            f"echomq-bench: error: unknown command {command!r}; use one of {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    module_name, function, _ = COMMANDS[command]
    invocation.typed(["echomq-bench", *args])  # meta.json records it as the run's command
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a Python without the project's packages (not the venv)
            raise BenchError(
                f"{exc.name} is not installed for {sys.executable}; run `make venv` and use "
                ".venv/bin/echomq-bench (or activate .venv)"
            ) from None
        if hasattr(module, function):
            handler: Callable[[list[str]], int] = getattr(module, function)
            return handler(rest)
        from bench.harness.run_folder import run_alone  # a stage with no main of its own runs alone

        run_alone(module, rest)  # a stage's module: its face, FLAGS and ABOUT (AloneStage)
        return 0
    except (BenchError, Interrupted, KeyboardInterrupt) as exc:
        # Our line goes on a line of its own, after a progress line the terminal may still hold
        # (and the ^C it echoed there); only a command that showed progress loaded the module.
        if (progress := sys.modules.get("bench.harness.progress")) is not None:
            progress.end_open_line()
        said = f"error: {exc}" if isinstance(exc, BenchError) else str(exc) or "interrupted"
        print(f"echomq-bench: {said}", file=sys.stderr)
        if after := getattr(exc, "after", None):  # the run's keys left on the server, and the command
            print(after, file=sys.stderr)
        return 2 if isinstance(exc, BenchError) else 130


if __name__ == "__main__":
    sys.exit(main())
