"""The one-way flow (lua/ <- protocol <- stages -> results/ -> report), held by import-linter's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def lint_imports() -> subprocess.CompletedProcess[str]:
    beside = Path(sys.executable).with_name("lint-imports")
    command = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert command, "import-linter is not installed (it is in the dev extra)"
    return subprocess.run(
        [command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_import_contract_is_kept() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    kept = [line for line in result.stdout.splitlines() if line.rstrip().endswith("KEPT")]
    assert len(kept) == 7, result.stdout  # the seven contracts in pyproject.toml


def test_every_stage_has_the_same_face() -> None:
    """bench run drives each stage through stage.py's check_profile, point_seconds and run_stage,
    and its main (or run_alone, from its FLAGS) runs it alone; each stage folder keeps its grid,
    CSV rows and terminal table in plan.py, rows.py, table.py."""
    import importlib

    from bench.results.stages import STAGES

    for stage, name in ((s.id, s.module) for s in STAGES):
        module = importlib.import_module(name)
        for function in ("check_profile", "point_seconds", "run_stage"):
            assert callable(getattr(module, function, None)), f"{name} has no {function}"
        assert callable(getattr(module, "main", None)) or hasattr(module, "FLAGS"), f"{name} cannot run alone"
        folder = REPO / Path(*name.split(".")[:-1])
        for part in ("plan.py", "rows.py", "table.py"):
            assert (folder / part).is_file(), f"{stage}: no {part}"


def test_every_stage_has_the_same_names_below_its_files() -> None:
    """The same face below the file names: the grid point is plan.Point, built by plan.points_of;
    a CSV row is built by rows.row_of; the terminal table by table.table."""
    import dataclasses
    import importlib

    from bench.results.stages import STAGES

    for stage, name in ((s.id, s.module) for s in STAGES):
        package = name.rsplit(".", 1)[0]
        plan = importlib.import_module(f"{package}.plan")
        point = getattr(plan, "Point", None)
        assert dataclasses.is_dataclass(point), f"{stage}: plan.py has no Point dataclass"
        assert callable(getattr(plan, "points_of", None)), f"{stage}: plan.py has no points_of"
        rows = importlib.import_module(f"{package}.rows")
        assert callable(getattr(rows, "row_of", None)), f"{stage}: rows.py has no row_of"
        table = importlib.import_module(f"{package}.table")
        assert callable(getattr(table, "table", None)), f"{stage}: table.py has no table"


def test_no_two_modules_of_the_suite_import_each_other() -> None:
    """No import circle, lazy or for type checking only: a data type lives in the module the
    interface does (protocol.base), a module that needs two others sits above both (run_folder)."""
    import grimp

    graph = grimp.build_graph("bench")
    circles = sorted(
        (module, imported)
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("bench.") and graph.find_shortest_chain(importer=imported, imported=module)
    )
    assert not circles, f"import circles (a module, one it imports that leads back): {circles}"


def test_every_import_of_the_suite_names_a_module_that_exists() -> None:
    """Imports inside functions too, and the experiments' (mypy and import-linter pass over a
    module they cannot find): a file moved or renamed leaves no import pointing at its old place."""
    import ast
    from importlib.util import find_spec

    missing = []
    for path in sorted([*(REPO / "bench").rglob("*.py"), *(REPO / "experiments").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("bench.") and find_spec(module) is None:
                    missing.append(f"{path.relative_to(REPO)}: {module}")
    assert not missing, missing


def test_a_stage_run_alone_refuses_a_bad_flag_in_one_line_before_any_server(capsys) -> None:
    from bench.__main__ import main

    for argv in (["finish-fetch", "--workers", "0"], ["bullmq-worker", "--jobs", "5"]):
        assert main(argv) == 2, argv
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("echomq-bench: error: --") and "minimum" in line, line
