"""Each script in experiments/ is a run: a run folder with meta.json and its output as CSV, which
`echomq-bench publish` takes like any run. Tiny sizes: what is checked is the folder, not a figure."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.experiment import experiment_run
from bench.paths import REPO
from bench.report.publish import publish_run
from bench.report.results_page import load_published, render_page

# script -> tiny arguments, and the CSVs it writes
SCRIPTS = {
    "spin_calls": (["50", "100"], ["spin_calls.csv"]),
    "sliced_budget_price": (["300"], ["sliced_budget_price.csv"]),
    "sliced_passes": (["300", "healthy"], ["sliced_passes.csv"]),
    "sliced_after_big_script": (["300"], ["sliced_after_big_script.csv"]),
    "sliced_call_faults": (["300"], ["sliced_call_faults.csv"]),
    # its _top and _tenths tables hold the calls SLOWLOG caught: on a fast moment, at 300 jobs, none
    "sliced_stalled_calls": (["300", "1"], ["sliced_stalled_calls.csv"]),
    "deadline_ablation": (["300", "1"], ["deadline_ablation.csv"]),
}
MACHINE_COLUMNS = ["foreign_cpu_pct", "steal_pct", "contended"]


def run_script(name: str, args: list[str], results: Path) -> Path:
    env = {**os.environ, "EMQ_RESULTS_DIR": str(results)}
    done = subprocess.run(
        [sys.executable, str(REPO / "experiments" / f"{name}.py"), *args],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    folders = list(results.iterdir())
    assert len(folders) == 1 and f"results: {folders[0]}" in done.stdout
    return folders[0]


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_an_experiment_writes_a_run_folder(tmp_path: Path, name: str) -> None:
    args, files = SCRIPTS[name]
    run = run_script(name, args, tmp_path / "results")
    assert run.name.endswith(f"-{name}")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["complete"] is True and meta["run_id"] == run.name and meta["experiment"] == name
    assert meta["command"] == f".venv/bin/python experiments/{name}.py {' '.join(args)}"
    assert {"git_sha", "cpu_model", "machine_before", "redis_version"} <= set(meta)
    for file in files:
        with open(run / file) as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
        assert rows, file
        assert list(reader.fieldnames or [])[-3:] == MACHINE_COLUMNS


def test_a_published_experiment_has_its_tables_on_the_page(tmp_path: Path) -> None:
    run = run_script("sliced_budget_price", ["300"], tmp_path / "results")
    meta = json.loads((run / "meta.json").read_text())
    meta["git_dirty"] = False  # as from a committed tree, whatever this checkout holds
    (run / "meta.json").write_text(json.dumps(meta))
    publish_run(run, tmp_path / "pub")
    page = render_page(load_published(tmp_path / "pub"))
    assert f"## {run.name}" in page and "### sliced_budget_price.csv" in page
    rows = [line for line in page.splitlines() if line.startswith("| 300 |")]
    assert len(rows) == 4  # budget off and on, twice
    assert "| size | budget_us | calls | redis_us_per_id | foreign_cpu_pct | steal_pct | contended |" in page
    assert "`.venv/bin/python experiments/sliced_budget_price.py 300`" in page


def test_an_experiment_that_fails_is_marked_incomplete(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), experiment_run("boom", ["1"], tmp_path) as exp:
        exp.row(x=1)
        _ = 1 / 0
    (run,) = tmp_path.iterdir()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["complete"] is False and "ZeroDivisionError" in meta["reason"]
    assert not list(run.glob("*.csv"))
