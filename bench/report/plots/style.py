"""What every figure shares: Plot, each variant's colour and line, log ticks, the atomic PNG write."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter

from bench.results.files import write_atomic_with

# Fixed colours so a variant looks the same in every figure.
VARIANT_ORDER = (
    "fused", "two_call", "two_call_pipelined", "atomic", "atomic_linear", "atomic_sliced", "app_side",
    "app_side_pipelined",
)  # fmt: skip
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)  # fmt: skip
DPI = 110
THOUSANDS = FuncFormatter(lambda v, _: f"{v:,.0f}")


@dataclass(frozen=True)
class Plot:
    file: str
    title: str
    caption: str


# The suite's own protocol: its variants go unprefixed; another's are "<protocol>.<variant>".
HOME_PROTOCOL = "echomq"


def protocol_labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """Each row's variant led by its protocol unless echomq's (``bullmq.fused``)."""
    # finish_fetch.csv names its variants "strategy"; the sweep and race files "variant"
    column = "strategy" if "strategy" in frame.columns else "variant"
    if frame.empty or "protocol" not in frame.columns or column not in frame.columns:
        return frame
    shown = frame.copy()
    other = shown["protocol"].fillna(HOME_PROTOCOL).astype(str) != HOME_PROTOCOL
    shown.loc[other, column] = shown.loc[other, "protocol"].astype(str) + "." + shown.loc[other, column]
    return shown


def _known(variant: str) -> bool:
    """A strategy or sweep variant the suite names, alone or at a load point (``fused-w4-rtt0``)."""
    return variant in VARIANT_ORDER or variant.split("-", 1)[0] in VARIANT_ORDER


def split_label(variant: str) -> tuple[str, str]:
    """``bullmq.fused-w4-rtt0`` -> ("bullmq", "fused-w4-rtt0"); unprefixed: echomq's. A hyphenated
    protocol (``echomq-deadline.atomic``) leads a known variant, unlike a dotted rtt (``rtt0.5``)."""
    head, dot, rest = variant.partition(".")
    if dot and rest and (head.isidentifier() or (head.replace("-", "_").isidentifier() and _known(rest))):
        return head, rest
    return HOME_PROTOCOL, variant


SHADE = 0.45  # another protocol's variant: its echomq colour this far to white (bullmq) or black
PROTOCOL_LINES = {HOME_PROTOCOL: "-", "bullmq": "--"}
OTHER_LINE = "-."  # a protocol without its own entry (echomq-deadline)


def colour(variant: str) -> str:
    """A variant's fixed colour; another protocol's a lighter (bullmq) or darker shade of it."""
    protocol, variant = split_label(variant)
    # "fused-w4-rtt0" (a strategy at one load point) takes its strategy's colour
    variant = variant.split("-", 1)[0] if variant.split("-", 1)[0] in VARIANT_ORDER else variant
    if variant in VARIANT_ORDER:
        base = PALETTE[VARIANT_ORDER.index(variant)]
    else:
        base = PALETTE[(len(VARIANT_ORDER) + sum(map(ord, variant))) % len(PALETTE)]
    if protocol == HOME_PROTOCOL:
        return base
    red, green, blue = to_rgb(base)
    if protocol == "bullmq":
        return to_hex((red + (1 - red) * SHADE, green + (1 - green) * SHADE, blue + (1 - blue) * SHADE))
    return to_hex((red * (1 - SHADE), green * (1 - SHADE), blue * (1 - SHADE)))


def line_style(variant: str) -> str:
    """Solid for echomq's variants, dashed for bullmq's, dash-dotted for another protocol's."""
    return PROTOCOL_LINES.get(split_label(variant)[0], OTHER_LINE)


def ordered(variants: Sequence[str]) -> list[str]:
    """Known variants first in their fixed order, each followed by its other protocols' labels."""
    known: list[str] = []
    for name in VARIANT_ORDER:
        ours = [v for v in variants if split_label(v)[1] == name]
        known += sorted(ours, key=lambda v: (split_label(v)[0] != HOME_PROTOCOL, split_label(v)[0]))
    return known + sorted(set(variants) - set(known))


def figure_title(figure: Figure) -> Text | None:
    """The figure's own title (``suptitle``), where matplotlib keeps it, or None."""
    title = getattr(figure, "_suptitle", None)
    return title if isinstance(title, Text) else None


def fit_titles(figure: Figure) -> None:
    """Each title wrapped to its width: the figure's, or its axes' column's (never over a neighbour)."""
    suptitle = figure_title(figure)
    if suptitle is not None and suptitle.get_text():
        suptitle.set_text(wrapped(suptitle.get_text(), figure, float(suptitle.get_fontsize())))
    axes = [ax for ax in figure.axes if ax.get_subplotspec() is not None]
    columns = max((ax.get_subplotspec().get_gridspec().ncols for ax in axes), default=1)  # type: ignore[union-attr]
    for ax in axes:
        title = ax.title
        if title.get_text():
            # an axes column, less its tick labels and axis label: about 80% of its share
            width = figure.get_figwidth() / columns * 0.8
            title.set_text(wrapped_to(title.get_text(), width, float(title.get_fontsize())))


def legend_columns(labels: Sequence[str], figure: Figure, fontsize: float, most: int) -> int:
    """How many columns a legend of ``labels`` across the figure can have and stay inside it."""
    chars = figure.get_figwidth() * 72 / (fontsize * 0.55) * 0.9  # points across / an average glyph
    entry = max((len(label) for label in labels), default=1) + 6  # the line sample and the gaps
    return max(1, min(most, len(labels), int(chars // entry)))


def _plain(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def plain_log_ticks(ax: Axes, axis: str = "y") -> None:
    """Log-axis ticks as plain numbers (2,000 rather than 2e3); call after plotting. Under two
    decades the minor ticks at 2 and 5 are labelled too, under one every minor tick."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    decades = math.log10(high / low) if low > 0 else 99.0

    def minor(value: float, _: object) -> str:
        lead = round(value / 10 ** math.floor(math.log10(value)), 6) if value > 0 else 0
        return _plain(value) if decades < 1 or (decades < 2 and lead in (2, 5)) else ""

    target.set_major_formatter(FuncFormatter(lambda v, _: _plain(v)))
    target.set_minor_formatter(FuncFormatter(minor))


def wrapped(text: str, figure: Figure, fontsize: float) -> str:
    """``text`` wrapped to the figure's width, so a subtitle is never cut off at its edges."""
    return wrapped_to(text, figure.get_figwidth() * 0.95, fontsize)


def wrapped_to(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped to ``width_in`` inches, its own line breaks kept."""
    chars = int(width_in * 72 / (fontsize * 0.6))  # points across / an average glyph
    return "\n".join("\n".join(textwrap.wrap(line, max(chars, 20)) or [""]) for line in text.split("\n"))


def saved(figure: Figure, out_dir: Path, name: str, title: str, caption: str, headed: bool = False) -> Plot:
    """Write the figure as PNG ``name`` atomically; ``headed``: with ``title`` as its own title too."""
    if headed:
        figure.suptitle(title)
    fit_titles(figure)
    FigureCanvasAgg(figure)
    write_atomic_with(out_dir / name, lambda handle: figure.savefig(handle, format="png", dpi=DPI))
    return Plot(name, title, caption)
