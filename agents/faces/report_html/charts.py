"""The report's charts, drawn by matplotlib as SVG text to inline in the page: no script, no font files, text kept
as text (selectable, sharp at any zoom and in print), scaled to the page's width by their viewBox."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eyas.agents.faces.report_html.record import Span

if TYPE_CHECKING:
    import matplotlib
    from matplotlib.figure import Figure

PALETTE = ("#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989")
SPAN_COLOURS = {"step": "#1f6feb", "gate": "#8c959f", "wait": "#d4a72c", "failure": "#d1242f"}
_SIZE = re.compile(r'\s(width|height)="[^"]*"')


@dataclass(frozen=True)
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[float | None]
    band: tuple[Sequence[float], Sequence[float]] | None = None  # a lower and an upper bound per point
    dashed: bool = False
    smoothed: bool = False  # drawn faint as measured, with its moving average (ema) over it


def ema(values: Sequence[float | None]) -> list[float | None]:
    """The exponential moving average of a noisy curve (a gap stays a gap), debiased as TensorBoard's is so that it
    starts at the first value rather than at 0. It averages over about a tenth of the points (2 to 50)."""
    span = min(50, max(2, len(values) // 10))
    weight = 1 - 2 / (span + 1)
    average, steps = 0.0, 0
    smoothed: list[float | None] = []
    for value in values:
        if value is None:
            smoothed.append(None)
            continue
        average, steps = weight * average + (1 - weight) * value, steps + 1
        smoothed.append(average / (1 - weight**steps))
    return smoothed


def spans_decades(series: Sequence[Series]) -> bool:
    """Whether the curves' positive values span more than 10x: then a log axis shows the late steps, which a
    linear one squashes under an early spike."""
    values = [value for one in series for value in one.y if value is not None and value > 0]
    return bool(values) and max(values) > 10 * min(values)


@dataclass(frozen=True)
class Chart:
    """An SVG and the number of data points drawn in it (the page states it, and tests read it)."""

    svg: str
    points: int
    notes: list[str] = field(default_factory=list)


def to_svg(figure: Figure, name: str) -> str:
    """The figure as an <svg> element: no XML prologue, no fixed size (CSS sizes it), and ids salted by `name`,
    so two charts on one page never share a clip-path id."""
    import matplotlib  # here, not at start-up of every eyas process (matplotlib takes ~0.3 s)

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    element = text[text.index("<svg") :]
    head, rest = element.split(">", 1)
    return _SIZE.sub("", head) + f' role="img" aria-label="{name}">' + rest


def _figure(height: float = 3.0) -> Figure:
    from matplotlib.figure import Figure  # here, not at start-up of every eyas process (matplotlib takes ~0.3 s)

    figure = Figure(figsize=(7.5, height), dpi=100)
    figure.set_facecolor("white")
    return figure


def line_chart(
    name: str, title: str, xlabel: str, ylabel: str, series: Sequence[Series], *, log_when_wide: bool = False
) -> Chart:
    """Lines over a shared x axis, each with its band when it has one; gaps (None) stay gaps. A smoothed series is
    drawn faint as measured, its moving average over it; `log_when_wide`: a log y axis when the values span 10x."""
    figure = _figure()
    axes = figure.add_subplot()
    points = 0
    for index, one in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        ys = _gaps(one.y)
        marker = "o" if len(ys) < 25 and not one.smoothed else None
        axes.plot(one.x, ys, label=f"{one.label}, as measured" if one.smoothed else one.label, color=colour,
                  marker=marker, markersize=3, linestyle="--" if one.dashed else "-",
                  alpha=0.3 if one.smoothed else 1.0, linewidth=1.0 if one.smoothed else 1.5)  # fmt: skip
        if one.smoothed:
            axes.plot(one.x, _gaps(ema(one.y)), label=f"{one.label}, moving average", color=colour, linewidth=2)
        if one.band is not None:
            axes.fill_between(one.x, one.band[0], one.band[1], color=colour, alpha=0.18, linewidth=0)
        points += sum(value is not None for value in one.y)
    if log_when_wide and spans_decades(series):
        axes.set_yscale("log")
        ylabel += " (log scale)"
    _decorate(axes, title, xlabel, ylabel, legend=len(series) > 1 or any(one.smoothed for one in series))
    return Chart(to_svg(figure, name), points)


def _gaps(values: Sequence[float | None]) -> list[float]:
    return [float("nan") if value is None else value for value in values]


def bar_chart(
    name: str,
    title: str,
    categories: Sequence[str],
    groups: Mapping[str, Sequence[float]],
    ylabel: str,
    errors: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> Chart:
    """Grouped bars: one group per category, one bar per key of `groups`; error bars from (lower, upper)."""
    figure = _figure()
    axes = figure.add_subplot()
    width = min(0.3, 0.8 / max(len(groups), 1))
    for index, (label, values) in enumerate(groups.items()):
        xs = [position + (index - (len(groups) - 1) / 2) * width for position in range(len(categories))]
        bounds = (errors or {}).get(label)
        yerr = None
        if bounds is not None:
            yerr = [[max(v - lo, 0.0) for v, lo in zip(values, bounds[0], strict=True)],
                    [max(hi - v, 0.0) for v, hi in zip(values, bounds[1], strict=True)]]  # fmt: skip
        axes.bar(xs, values, width, label=label, color=PALETTE[index % len(PALETTE)], yerr=yerr, capsize=3)
    axes.set_xticks(range(len(categories)), list(categories))
    axes.set_xlim(-0.6, len(categories) - 0.4)  # a lone category keeps bars of the width several would have
    _decorate(axes, title, "", ylabel, legend=len(groups) > 1)
    return Chart(to_svg(figure, name), sum(len(values) for values in groups.values()))


def gantt(name: str, spans: Sequence[Span], origin: float) -> Chart:
    """The run's timeline: one row per phase or gate, minutes from the run's start; waits and failures coloured."""
    rows = list(dict.fromkeys(span.row for span in spans))
    figure = _figure(height=max(2.0, 0.32 * len(rows) + 1.0))
    axes = figure.add_subplot()
    for span in spans:
        start, length = (span.start - origin) / 60, max((span.end - span.start) / 60, 0.02)
        axes.broken_barh([(start, length)], (rows.index(span.row) - 0.35, 0.7), color=SPAN_COLOURS[span.kind])
    axes.set_yticks(range(len(rows)), rows)
    axes.invert_yaxis()
    for kind, colour in SPAN_COLOURS.items():
        axes.bar([0], [0], color=colour, label=kind, width=0)  # the legend's swatches
    _decorate(axes, "Phases, gates and waits", "minutes since the run started", "", legend=True)
    return Chart(to_svg(figure, name), len(spans))


def _decorate(axes: matplotlib.axes.Axes, title: str, xlabel: str, ylabel: str, *, legend: bool) -> None:
    axes.set_title(title, loc="left", fontsize=11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.spines[["top", "right"]].set_visible(False)
    if legend:
        # Outside the plot, to its right: never over a bar or a line, and never a swatch on a bar of its colour.
        axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
