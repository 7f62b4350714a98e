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


def line_chart(name: str, title: str, xlabel: str, ylabel: str, series: Sequence[Series]) -> Chart:
    """Lines over a shared x axis, each with its band when it has one; gaps (None) stay gaps."""
    figure = _figure()
    axes = figure.add_subplot()
    points = 0
    for index, one in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        ys = [float("nan") if value is None else value for value in one.y]
        axes.plot(one.x, ys, label=one.label, color=colour, marker="o" if len(ys) < 25 else None, markersize=3,
                  linestyle="--" if one.dashed else "-")  # fmt: skip
        if one.band is not None:
            axes.fill_between(one.x, one.band[0], one.band[1], color=colour, alpha=0.18, linewidth=0)
        points += sum(value is not None for value in one.y)
    _decorate(axes, title, xlabel, ylabel, legend=len(series) > 1)
    return Chart(to_svg(figure, name), points)


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
    handles = [axes.bar([0], [0], color=colour, label=kind, width=0) for kind, colour in SPAN_COLOURS.items()]
    axes.legend(handles=handles, loc="lower right", fontsize=8, frameon=False, ncols=4)
    _decorate(axes, "Phases, gates and waits", "minutes since the run started", "", legend=False)
    return Chart(to_svg(figure, name), len(spans))


def _decorate(axes: matplotlib.axes.Axes, title: str, xlabel: str, ylabel: str, *, legend: bool) -> None:
    axes.set_title(title, loc="left", fontsize=11)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    axes.spines[["top", "right"]].set_visible(False)
    if legend:
        axes.legend(fontsize=8, frameon=False)
