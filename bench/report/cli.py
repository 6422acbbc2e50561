"""`python -m bench report | compare | runs`: arguments in, one document or table out."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.errors import BenchError
from bench.report.compare import compare_runs
from bench.report.compare_context import drift
from bench.report.compare_markdown import compare_markdown
from bench.report.load import load_run, resolve_run
from bench.report.render import write_report
from bench.report.runs import list_runs, runs_table
from bench.results import RESULTS_DIR, write_atomic


def report_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench report", description="Write report.md and plots.")
    parser.add_argument("run", nargs="?", help="run folder or run id (default: the newest run)")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    if args.run:
        path = resolve_run(args.run, args.results)
    else:
        runs = list_runs(args.results)
        if not runs:
            raise BenchError(f"no runs in {args.results}; `make bench` makes one, or give a run folder")
        path = runs[-1].path
    print(write_report(path))
    return 0


def compare_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench compare", description="Compare run B against run A.")
    parser.add_argument("run_a", help="the baseline: run folder or run id")
    parser.add_argument("run_b", help="the run to judge against A")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any row is worse")
    parser.add_argument("--changed", action="store_true", help="leave out the rows judged same")
    parser.add_argument("--output", type=Path, help="also write the table to this markdown file")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    a = load_run(resolve_run(args.run_a, args.results))
    b = load_run(resolve_run(args.run_b, args.results))
    comparison = compare_runs(a.frames, b.frames, drift(a.meta, b.meta))
    text = compare_markdown(a, b, comparison, args.changed)
    print(text, end="")
    if args.output:
        write_atomic(args.output, text)
    if args.fail_on_regression and comparison.count("worse"):
        return 1
    return 0


def runs_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench runs", description="List the runs in results/.")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    runs = list_runs(args.results)
    if not runs:
        print(f"no runs in {args.results} (`make bench` makes one)")
        return 0
    print(runs_table(runs))
    return 0
