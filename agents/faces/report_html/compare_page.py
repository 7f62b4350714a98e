"""compare.html: several runs on one page, in the single report's style: their training curves overlaid (loss and
tokens/s per step), and their sizes and evaluation figures side by side. Offline, no script, like report.html."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eyas.agents.faces.report_html.charts import Series, bar_chart, line_chart
from eyas.agents.faces.report_html.comparison import (
    COMPARED_MEASURES,
    RunFigures,
    comparison_markdown,
    final_loss,
    mean_tokens_per_s,
    positions_text,
    shown,
    size_rows,
)
from eyas.agents.faces.report_html.page import STYLE
from eyas.agents.faces.report_html.sections import figure, h, missing, section, table
from eyas.tools.private_files import write_private

COMPARE_STYLE = "tr.differs td { background: #fff8c5; } tr.differs td:first-child { font-weight: bold; }"
HTML_NAME = "compare.html"
MARKDOWN_NAME = "compare.md"


def outcomes(runs: Sequence[RunFigures]) -> str:
    rows = [(f'<span data-run="{h(run.run_id)}">{h(run.run_id)}</span>', h(run.outcome)) for run in runs]
    return section("outcomes", "Outcomes", table(("run", "outcome"), rows))


def sizes(runs: Sequence[RunFigures]) -> str:
    head = "".join(f"<th>{h(run.run_id)}</th>" for run in runs)
    body = "".join(
        f"<tr{' class=differs' if differs else ''}><td>{h(name)}</td>"
        + "".join(f"<td>{h(shown(value))}</td>" for value in values)
        + "</tr>"
        for name, values, differs in size_rows(runs)
    )
    note = "<p>A highlighted size differs between the runs.</p>"
    grid = f'<div class="scroll"><table><thead><tr><th>size</th>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    return section("sizes", "Sizes", note + grid)


def evaluation(runs: Sequence[RunFigures]) -> str:
    headers = ("run", "k", *(label for _, label in COMPARED_MEASURES), "acceptance by position")
    rows: list[Sequence[str]] = []
    for run in runs:
        if not run.evaluation:
            rows.append((h(run.run_id), "—", *(["not evaluated"] + ["—"] * len(COMPARED_MEASURES))))
        for result in run.evaluation:
            cells = [figure_cell(key, result.figures.get(key)) for key, _ in COMPARED_MEASURES]
            rows.append((h(run.run_id), h(result.k), *cells, h(positions_text(result.per_position))))
    body = table(headers, rows)
    measured = [(run, result) for run in runs for result in run.evaluation if result.per_position]
    if measured:
        positions = max(len(result.per_position) for _, result in measured)
        groups = {
            f"{run.run_id} k={result.k}": [*result.per_position, *[0.0] * (positions - len(result.per_position))]
            for run, result in measured
        }
        categories = [f"position {position + 1}" for position in range(positions)]
        chart = bar_chart("compare-pos", "Acceptance by draft position", categories, groups, "acceptance rate")
        body += figure(chart, "Acceptance per draft position, each run at each k it measured")
    return section("evaluation", "Evaluation", body)


def figure_cell(key: str, value: float | None) -> str:
    """A measure's cell, carrying its exact value for a reader (and the tests) beside the rounded one shown."""
    return f'<span data-key="{h(key)}" data-value="{h(value)}">{h(shown(value))}</span>'


def training(runs: Sequence[RunFigures]) -> str:
    rows = [
        (h(run.run_id), h(len(run.training.steps) or "—"), h(shown(final_loss(run.training))),
         h(shown(mean_tokens_per_s(run.training))), h(run.training.source or "no curves"))
        for run in runs
    ]  # fmt: skip
    body = table(("run", "steps", "final loss", "mean tokens/s", "from"), rows)
    curves = [run for run in runs if run.training.steps]
    if not curves:
        return section("training", "Training", body + missing("training curves in any of these runs"))
    loss = [Series(run.run_id, run.training.steps, run.training.loss, smoothed=True) for run in curves]
    body += figure(
        line_chart("compare-loss", "Training loss", "step", "loss", loss, log_when_wide=True),
        "Loss per step, one colour per run (faint: as measured; solid: its moving average)",
    )
    speed = [
        Series(run.run_id, run.training.steps, run.training.tokens_per_s, smoothed=True)
        for run in curves
        if any(value is not None for value in run.training.tokens_per_s)
    ]
    if speed:
        body += figure(
            line_chart("compare-tps", "Training throughput", "step", "tokens/s", speed),
            "Tokens per second per step, one colour per run (faint: as measured; solid: its moving average)",
        )
    else:
        body += missing("training throughput per step in any of these runs")
    return section("training", "Training", body)


def render_comparison(runs: Sequence[RunFigures]) -> str:
    ids = ", ".join(run.run_id for run in runs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>eyas runs compared: {h(ids)}</title><style>{STYLE}{COMPARE_STYLE}</style></head>"
        f"<body><header><h1>eyas runs compared</h1><p>{h(ids)}</p>"
        f"<p>The markdown version is beside this page: {MARKDOWN_NAME}.</p></header>"
        f"{outcomes(runs)}{sizes(runs)}{evaluation(runs)}{training(runs)}</body></html>\n"
    )


def write_comparison(folder: Path, runs: Sequence[RunFigures]) -> tuple[Path, Path]:
    """compare.html and compare.md in `folder` (the first run's), owner-only like the rest of a run folder."""
    page, text = folder / HTML_NAME, folder / MARKDOWN_NAME
    write_private(page, render_comparison(runs))
    write_private(text, comparison_markdown(runs))
    return page, text
