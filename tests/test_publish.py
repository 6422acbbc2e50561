"""`echomq-bench publish`: a run's portable copy, and the pages made from the published runs.

A fixture run is published into a temporary folder only; the repository's own
docs/results/ is checked as it is committed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.errors import BenchError
from bench.paths import REPO
from bench.report.publish import BUDGET_BYTES, PUBLISHED_DIR, machine_roots, publish_run, published_runs
from bench.report.results_page import BEGIN, END, FINDINGS_BEGIN, FINDINGS_END, README, stale_pages

DATA = Path(__file__).parent / "data"
SECRET = "s3cr3t-pass"
PORTABLE = {
    "meta.json",
    "finish_fetch.csv",
    "race.csv",
    "script_cost.csv",
    "sweep_cost.csv",
    "report.md",
    "x.png",
}


def fixture_run(tmp_path: Path, run_id: str = "20240501-100000-default") -> Path:
    """The smoke fixture as a complete default run, with what must not leave the machine in it:
    a Redis password, paths of this machine, and raw tool files."""
    run = tmp_path / "results" / run_id
    shutil.copytree(DATA / "20240501-100000-smoke", run)
    meta = json.loads((run / "meta.json").read_text())
    meta.update(
        run_id=run_id,
        profile="default",
        command=f"echomq-bench run --profile default --redis-url redis://app:{SECRET}@db:6379",
        redis_url=f"redis://app:{SECRET}@db.internal:6379/0",
        redis_binary=str(tmp_path / "redis" / "bin" / "redis-server"),
        protocols={"echomq": {"script_files": {"fused": str(REPO / "lua" / "moveToFinished-14.lua")}}},
    )
    (run / "meta.json").write_text(json.dumps(meta, indent=2))
    (run / "report.md").write_text(f"# run\n\nplots in {run}/x.png, Redis redis://:{SECRET}@h:1\n")
    (run / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    for raw in ("locust", "pyperf", "raw"):
        (run / raw).mkdir()
        (run / raw / "big.json").write_text("{}")
    return run


def published_text(folder: Path) -> str:
    return "\n".join(p.read_text() for p in folder.iterdir() if p.suffix != ".png")


def test_publish_copies_the_portable_files_only_and_nothing_private(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    published = publish_run(run, tmp_path / "pub")
    folder = tmp_path / "pub" / run.name
    assert published.folder == folder
    assert {p.name for p in folder.iterdir()} == PORTABLE  # no hdr/, locust/, pyperf/, raw/
    assert published.size == sum(p.stat().st_size for p in folder.iterdir()) <= BUDGET_BYTES
    text = published_text(folder)
    assert SECRET not in text
    for root in [str(tmp_path), str(REPO), *machine_roots()]:
        assert root not in text, root
    meta = json.loads((folder / "meta.json").read_text())  # still JSON
    assert meta["redis_url"] == "redis://***@db.internal:6379/0"
    assert meta["redis_binary"] == ".../redis-server"
    assert meta["protocols"]["echomq"]["script_files"]["fused"] == "lua/moveToFinished-14.lua"
    assert (folder / "x.png").read_bytes() == (run / "x.png").read_bytes()


def test_publish_refuses_a_run_over_the_budget_in_one_line(tmp_path: Path) -> None:
    run = fixture_run(tmp_path)
    with pytest.raises(BenchError, match="over the") as caught:
        publish_run(run, tmp_path / "pub", budget=4096)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "pub" / run.name).exists()


@pytest.mark.parametrize("meta", [{"git_dirty": True}, {"git_sha": None}])
def test_publish_refuses_a_run_of_uncommitted_code(tmp_path: Path, meta: dict[str, object]) -> None:
    run = fixture_run(tmp_path)
    recorded = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**recorded, **meta}))
    with pytest.raises(BenchError, match="a published figure must come from a commit"):
        publish_run(run, tmp_path / "pub")
    assert not (tmp_path / "pub").exists()


def test_publish_refuses_an_incomplete_run(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="incomplete"):
        publish_run(DATA / "20240503-100000-default", tmp_path / "pub")


def test_publish_command_says_what_it_copied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = fixture_run(tmp_path)
    assert main(["publish", str(run), "--to", str(tmp_path / "pub")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"published {run.name}: 7 files") and len(out.splitlines()) == 1
    assert main(["publish"]) == 2  # neither a run nor --page: one line, non-zero


def test_the_pages_are_what_the_published_runs_make(tmp_path: Path) -> None:
    """Write the page and the README's block, then break them the ways a hand would."""
    root = tmp_path / "pub"
    older = fixture_run(tmp_path, "20240501-100000-default")
    newer = fixture_run(tmp_path, "20240502-100000-default")
    publish_run(older, root)
    publish_run(newer, root)
    readme = tmp_path / "README.md"
    shutil.copy(README, readme)
    check = ["publish", "--page", "--check", "--to", str(root), "--readme", str(readme)]
    assert main(check) == 1  # nothing written yet
    assert main(["publish", "--page", "--to", str(root), "--readme", str(readme)]) == 0
    assert stale_pages(root, readme) == []
    assert main(check) == 0

    page = (root / "README.md").read_text()
    assert page.index("## 20240502-100000-default") < page.index("## 20240501-100000-default")
    block = readme.read_text().split(BEGIN)[1].split(END)[0]
    assert "[20240502-100000-default](docs/results/README.md#20240502-100000-default)" in block
    assert "How quiet the machine was in run [20240502-100000-default]" in block
    found = readme.read_text().split(FINDINGS_BEGIN)[1].split(FINDINGS_END)[0]
    assert "From run [20240502-100000-default]" in found
    assert "**Fuse** (it never lost):" in found and "| protocol | in flight | rtt 0 ms |" in found
    assert "| echomq | 1 | 1.67 [1.67-1.67], pace not judged |" in found  # the fixture at rtt 0
    readme.write_text(readme.read_text().replace("**Fuse** (it never lost):", "**Fuse** (it never lost!):"))
    assert stale_pages(root, readme) == [readme]  # a finding edited by hand
    main(["publish", "--page", "--to", str(root), "--readme", str(readme)])

    page_path = root / "README.md"
    page_path.write_text(page.replace("1,000", "1,001", 1))  # a figure edited by hand
    assert stale_pages(root, readme) == [page_path]
    page_path.write_text(page)
    readme.write_text(readme.read_text().replace("1.67 [1.67-1.67]", "1.70 [1.67-1.67]"))
    assert stale_pages(root, readme) == [readme]
    main(["publish", "--page", "--to", str(root), "--readme", str(readme)])
    shutil.rmtree(root / "20240502-100000-default")  # a run deleted
    assert set(stale_pages(root, readme)) == {page_path, readme}


def test_a_readme_without_its_markers_is_one_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(BenchError, match="put the two markers back"):
        stale_pages(tmp_path / "pub", readme)


@pytest.mark.timeout(180)  # every published run's pages drawn again: 21 s alone, over 60 beside a hog
def test_the_committed_pages_are_what_the_committed_runs_make() -> None:
    """docs/results/README.md and the README's table, as `make docs` writes them."""
    assert stale_pages(PUBLISHED_DIR, README) == [], "run `make docs` and commit what it writes"


def test_every_committed_run_is_within_the_budget_and_private() -> None:
    for folder in published_runs(PUBLISHED_DIR):
        assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) <= BUDGET_BYTES, folder.name
        assert not [p for p in folder.iterdir() if p.is_dir()], f"{folder.name}: a raw folder was committed"
        text = published_text(folder)
        for root in machine_roots():
            assert root not in text, f"{folder.name} names {root}"


def test_the_recorded_command_keeps_no_password() -> None:
    from bench import invocation

    invocation.typed(["echomq-bench", "run", "--redis-url", f"redis://app:{SECRET}@db:6379/0"])
    try:
        assert invocation.command() == "echomq-bench run --redis-url redis://app:***@db:6379/0"
    finally:
        invocation.typed([])
    assert invocation.command() is None
