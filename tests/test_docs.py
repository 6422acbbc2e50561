"""The README and docs/ pages: every link lands, the front page stays a front page, and every
column of every result file is described."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.paths import REPO
from bench.results.rows import columns_of
from bench.results.stages import FILES

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchors(page: Path) -> set[str]:
    """The anchors a GitHub-style renderer gives the page's headings."""
    found: set[str] = set()
    for _, title in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        n = 1
        unique = slug
        while unique in found:
            unique = f"{slug}-{n}"
            n += 1
        found.add(unique)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: another site's business
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_lands(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A `title`, here\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-title-here) [self](#top) [gone](missing.md) [bad](there.md#nope)\n"
        "```\n[in code](ignored.md)\n```\n# Top\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "there.md#nope: no heading with that anchor"]


def test_the_readme_is_a_front_page() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    first_command = next(i for i, line in enumerate(lines, 1) if line.startswith("make bench"))
    assert first_command <= 30 and any(line.startswith("make test") for line in lines[:30])


def test_every_column_of_every_result_file_is_described() -> None:
    reference = (REPO / "docs" / "results-reference.md").read_text()
    every = [columns_of(f.row) for f in FILES]
    assert len(every) >= 10  # one a result file
    assert sorted({c for columns in every for c in columns if f"`{c}`" not in reference}) == []
