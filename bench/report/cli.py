"""`python -m bench report | compare | learn | runs | publish`: arguments in, one document or table out."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.report.compare.learnt import LEARNT_FILE, learn, read_learnt, write_learnt
from bench.report.compare.metrics import compare_runs
from bench.report.compare.page import compare_markdown
from bench.report.load import STAGE_FILES, is_run, load_run
from bench.report.publish import AA_DIR, DATA_PATTERNS, PUBLISHED_DIR, publish_run
from bench.report.render import write_report
from bench.report.results_page import README, pages, stale_pages
from bench.results.files import RESULTS_DIR, resolve_run, write_atomic
from bench.results.meta import META_FILE, RunMeta, read_meta


def _parsed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    return parser.parse_args(argv)


def report_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench report", description="Write report.md and plots.")
    parser.add_argument("run", nargs="?", help="run folder or run id (default: the newest run)")
    args = _parsed(parser, argv)
    if args.run:
        path = resolve_run(args.run, args.results)
    elif runs := list_runs(args.results):
        path = runs[-1].path
    else:
        raise BenchError(f"no runs in {args.results}; `make bench` makes one, or give a run folder")
    print(write_report(path))
    return 0


def compare_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench compare", description="Compare run B against run A.")
    parser.add_argument("run_a", help="the baseline: run folder or run id")
    parser.add_argument("run_b", help="the run to judge against A")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any row is worse")
    parser.add_argument("--changed", action="store_true", help="leave out the rows judged same")
    parser.add_argument("--output", type=Path, help="also write the table to this markdown file")
    parser.add_argument(
        "--learnt", type=Path, default=LEARNT_FILE, help="the drift timed figures are judged beyond (learn)"
    )
    args = _parsed(parser, argv)
    a = load_run(resolve_run(args.run_a, args.results))
    b = load_run(resolve_run(args.run_b, args.results))
    comparison = compare_runs(a.frames, b.frames, read_learnt(args.learnt))
    text = compare_markdown(a, b, comparison, args.changed)
    print(text, end="")
    if args.output:
        write_atomic(args.output, text)
    return 1 if args.fail_on_regression and comparison.count("worse") else 0


def learn_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="echomq-bench learn",
        description="Learn the drift between runs of one commit from A/A pairs: the thresholds compare "
        "judges timed figures beyond. Publish the runs (docs/results/) so the source stays at hand.",
    )
    parser.add_argument("runs", nargs="+", help="A/A pairs of runs of one commit: A1 B1 [A2 B2 ...]")
    parser.add_argument("--output", type=Path, default=LEARNT_FILE, help="where the learnt drift is kept")
    parser.add_argument(
        "--keep", type=Path, default=AA_DIR, help="where the pairs' CSVs and meta.json are kept"
    )
    args = _parsed(parser, argv)
    if len(args.runs) % 2:
        raise BenchError(f"give runs in A/A pairs: {len(args.runs)} runs is not a whole number of pairs")
    runs = [load_run(resolve_run(run, args.results)) for run in args.runs]
    commits = {str(run.meta.git_sha or "") for run in runs}
    if len(commits) != 1 or any(run.meta.git_dirty for run in runs) or "" in commits:
        raise BenchError(
            "an A/A pair is two runs of one committed tree; these runs' commits differ or are dirty"
        )
    pairs = list(zip(runs[::2], runs[1::2], strict=True))
    compared = [compare_runs(a.frames, b.frames).rows for a, b in pairs]
    learnt = learn(compared, tuple((a.run_id, b.run_id) for a, b in pairs), commits.pop())
    write_learnt(learnt, args.output)
    for run in runs:  # the source stays at hand: each run's data, not its pages
        publish_run(run.path, args.keep, patterns=DATA_PATTERNS)
    for name, drift in sorted(learnt.drift.items()):
        print(f"{name:<52} {drift:6.1%}  over {learnt.points[name]} points")
    print(f"wrote {_shown(args.output)}: {learnt.source()}; the runs' data in {_shown(args.keep)}")
    return 0


@dataclass(frozen=True)
class RunListing:
    path: Path
    meta: RunMeta | None  # None: no meta.json, or one that does not read
    stages: tuple[str, ...]


def list_runs(results: Path) -> list[RunListing]:
    """Run folders under ``results``, oldest first (run ids start with their time)."""
    if not results.is_dir():
        return []
    runs = []
    for path in sorted(p for p in results.iterdir() if p.is_dir() and is_run(p)):
        try:
            meta = read_meta(path) if (path / META_FILE).is_file() else None
        except (OSError, ValueError, BenchError):
            meta = None
        stages = tuple(s for s, row in STAGE_FILES.items() if (path / row.FILE).is_file())
        runs.append(RunListing(path, meta, stages))
    return runs


def runs_table(runs: Sequence[RunListing]) -> str:
    """A row a run, its columns padded to their widest cell."""
    rows = []
    for run in runs:
        meta = run.meta
        status = (
            "no meta.json" if not meta
            else "complete" if meta.complete
            else f"INCOMPLETE: {meta.reason or 'no reason recorded'}"
        )  # fmt: skip
        server = f"{meta.server} {meta.server_release}" if meta and meta.server_release else "?"
        rows.append({
            "run": run.path.name, "profile": (meta and meta.profile) or "?",
            "date": str((meta and meta.started) or "?").replace("T", " "),
            "server": server, "git": str((meta and meta.git_sha) or "?")[:10],
            "stages": ",".join(run.stages) or "-", "status": status,
        })  # fmt: skip
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in rows[0]}
    lines = ["  ".join(c.ljust(width) for c, width in widths.items()).rstrip()]
    lines += ["  ".join(str(row[c]).ljust(width) for c, width in widths.items()).rstrip() for row in rows]
    return "\n".join(lines)


def runs_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="echomq-bench runs", description="List the runs in results/.")
    args = _parsed(parser, argv)
    runs = list_runs(args.results)
    print(runs_table(runs) if runs else f"no runs in {args.results} (`make bench` makes one)")
    return 0


def _shown(path: Path) -> str:
    """``path`` as the user may type it: relative to where they are when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def publish_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="echomq-bench publish",
        description="Copy a run's portable files into docs/results/<run-id>/, or (--page) write the "
        "results page and the README's headline table from the published runs.",
    )
    parser.add_argument("run", nargs="?", help="run folder or run id to publish")
    parser.add_argument(
        "--page", action="store_true", help="write docs/results/README.md and the README's table"
    )
    parser.add_argument("--check", action="store_true", help="with --page: write nothing, exit 1 when stale")
    parser.add_argument("--to", type=Path, default=PUBLISHED_DIR, help="where published runs are")
    parser.add_argument("--readme", type=Path, default=README, help="the README whose table is rewritten")
    args = _parsed(parser, argv)
    if args.run and (args.page or args.check):
        raise BenchError("give a run to publish, or --page, not both; publish first, then --page")
    if args.run:
        published = publish_run(resolve_run(args.run, args.results), args.to)
        print(f"published {published.run_id}: {len(published.files)} files, {published.size / 1024:.0f} KB "
              f"in {_shown(published.folder)}; `make docs` writes the results page")  # fmt: skip
        return 0
    if not args.page:
        raise BenchError("give a run to publish (results/<run-id>), or --page to write the results page")
    if args.check:
        stale = stale_pages(args.to, args.readme)
        for path in stale:
            print(f"{_shown(path)} differs from what the published runs make; run `make docs`")
        return 1 if stale else 0
    for path, text in pages(args.to, args.readme).items():
        write_atomic(path, text)
        print(f"wrote {_shown(path)}")
    return 0
