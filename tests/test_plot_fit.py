"""Every figure of the fixture runs drawn, and every legend and title inside its figure's width
and height (matplotlib's tight bounding boxes against the figure's): a reader sees each whole."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from bench.report.plots.latency import latency_percentiles
from bench.report.plots.style import figure_title
from bench.report.render import write_report
from bench.results.files import write_csv
from bench.results.finish_fetch import FinishFetchRow
from bench.results.hdr import new_histogram, record_us
from bench.results.rows import columns_of
from tests.data.make_fixtures import RUN_A, write_concurrency_run
from tests.test_report_protocols import write_run

DATA = Path(__file__).parent / "data"
SLACK_PX = 1.0  # a rounding pixel


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch, figures_undrawn: None) -> Iterator[dict[str, Figure]]:
    """Each figure a report saves, by file name, as saved: not rasterized into its PNG file
    (figures_undrawn), since ``outside`` draws it on its own canvas to measure it."""
    figures: dict[str, Figure] = {}
    original = Figure.savefig  # figures_undrawn's: the file written, the figure not drawn

    def keep(self: Figure, target: object, *args: object, **kwargs: object) -> None:
        original(self, target, *args, **kwargs)
        suptitle = figure_title(self)
        title = suptitle.get_text() if suptitle is not None else self.axes[0].get_title()
        figures[f"{len(figures)}: {title[:50]}"] = self

    monkeypatch.setattr(Figure, "savefig", keep)
    yield figures


def texts(figure: Figure) -> list[tuple[str, Artist]]:
    """The figure's title and legends, and every axes' titles and legend."""
    found: list[tuple[str, Artist]] = []
    suptitle = figure_title(figure)
    if suptitle is not None:
        found.append(("suptitle", suptitle))
    found += [("figure legend", legend) for legend in figure.legends]
    for n, ax in enumerate(figure.axes):
        for side in ("left", "center", "right"):
            title = ax.get_title(side)
            if title:
                found.append(
                    (
                        f"axes {n} title {title[:30]!r}",
                        ax.title if side == "center" else getattr(ax, f"_{side}_title"),
                    )
                )
        if ax.get_legend() is not None:
            found.append((f"axes {n} legend", ax.get_legend()))
    return found


def outside(figure: Figure) -> list[str]:
    """What sticks out of the figure: each artist's name and how far, in pixels. Laid out and drawn
    with the renderer's drawing calls left out: each artist's place as a full draw leaves it."""
    figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    box = figure.bbox
    out = []
    for name, artist in texts(figure):
        extent = artist.get_window_extent(renderer)
        over = max(box.x0 - extent.x0, extent.x1 - box.x1, box.y0 - extent.y0, extent.y1 - box.y1)
        if over > SLACK_PX:
            out.append(f"{name} by {over:.0f} px")
    return out


def several_protocols(folder: Path) -> Path:
    """The concurrency run with two more protocols' rows: three protocols at each concurrency."""
    run = write_concurrency_run(folder)
    frame = pd.read_csv(run / "finish_fetch.csv")
    jobs, fused = frame["jobs_per_s"], frame["strategy"] == "fused"
    more = [frame.assign(protocol=name, jobs_per_s=jobs.where(~fused, jobs * scale))
            for name, scale in (("echomq-deadline", 0.9), ("bullmq", 0.7))]  # fmt: skip
    rows = pd.concat([frame, *more]).astype(object).where(lambda f: f.notna(), None)
    write_csv(run / "finish_fetch.csv", columns_of(FinishFetchRow), rows.to_dict("records"))
    return run


@pytest.mark.parametrize("make", ["smoke", "concurrency", "protocols"])
def test_every_legend_and_title_fits_its_figure(make: str, tmp_path: Path, drawn: dict[str, Figure]) -> None:
    if make == "smoke":
        run = tmp_path / RUN_A
        shutil.copytree(DATA / RUN_A, run)
    elif make == "concurrency":
        run = several_protocols(tmp_path)
    else:
        run = write_run(tmp_path / "20261201-100000-smoke")
    write_report(run)
    assert drawn, "no figure drawn"
    sticking = {name: out for name, figure in drawn.items() if (out := outside(figure))}
    assert not sticking, sticking


def test_the_latency_legend_fits_with_three_protocols_long_labels(
    tmp_path: Path, drawn: dict[str, Figure]
) -> None:
    """The issue's figure: every protocol's strategies at two points, labels of 50 characters
    ("bullmq.two_call_pipelined, 4 workers x 8, rtt 1 ms (n=32,425)") in one legend."""
    histograms = {}
    recorded = new_histogram()
    for value in range(100, 32_525):
        record_us(recorded, value)
    for protocol in ("", "bullmq.", "echomq-deadline."):
        for strategy in ("fused", "two_call", "two_call_pipelined"):
            for point in ("w4-c8-rtt1", "w4-c1-rtt0"):
                for metric in ("cycle", "e2e"):
                    histogram = new_histogram()
                    histogram.add(recorded)  # each its own copy of the same 32,425 values
                    histograms[(metric, f"{protocol}{strategy}-{point}")] = histogram
    assert latency_percentiles(histograms, tmp_path, e2e_name="backlog wait (enqueue to fetch, closed loop)")
    [(name, figure)] = drawn.items()
    assert not outside(figure), name
