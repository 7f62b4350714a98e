"""What `eyas report RUN --compare RUN2 ...` puts side by side: each run's sizes, its evaluation at each k measured,
and its training curves (loss and tokens/s per step), taken from the run's record as its own report takes them, so
that the comparison and the single reports never disagree. The markdown version is here; the page in compare_page.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from eyas.agents.faces.report_html.record import RunRecord
from eyas.graph.phases.evaluate.record import Evaluation, run_evaluation
from eyas.graph.phases.report.headline import headline

# The evaluation's measures compared, in the order the tables show them (per_position is its own column).
COMPARED_MEASURES = (
    ("mean_acceptance_length", "mean acceptance length"),
    ("acceptance_rate", "acceptance rate"),
    ("tokens_per_s_baseline", "tokens/s without drafter"),
    ("tokens_per_s_speculative", "tokens/s with drafter"),
    ("speedup", "speedup"),
    ("ngram_speedup", "n-gram speedup"),  # vLLM's n-gram speculation at the same k: the free baseline to beat
)


class Measured(BaseModel):
    """One k's evaluation: the compared measures (None where not measured) and acceptance per draft position."""

    k: str
    figures: dict[str, float | None]
    per_position: list[float] = Field(default_factory=list)


class Curve(BaseModel):
    """Training per step: the step numbers and, at each, the loss and tokens/s (None where not logged)."""

    steps: list[float] = Field(default_factory=list)
    loss: list[float | None] = Field(default_factory=list)
    tokens_per_s: list[float | None] = Field(default_factory=list)
    source: str = Field("", description="metrics.jsonl, the job log, or empty when the run has no curves")


class RunFigures(BaseModel):
    run_id: str
    outcome: str
    sizes: dict[str, Any]
    evaluation: list[Measured] = Field(default_factory=list, description="one per k measured; empty: not evaluated")
    training: Curve = Curve()

    def as_json(self) -> dict[str, Any]:
        """The figures as --json gives them: the training's totals, not every step (the page and metrics.jsonl
        have those)."""
        curve = self.training
        totals = {
            "steps": len(curve.steps),
            "final_loss": final_loss(curve),
            "mean_tokens_per_s": mean_tokens_per_s(curve),
            "source": curve.source or None,
        }
        return self.model_dump(exclude={"training"}) | {"training": totals}


def run_figures(run_id: str, record: RunRecord) -> RunFigures:
    """The figures of one run that a comparison shows, under the id of its folder (the id the user named)."""
    evaluation = run_evaluation(record.state)
    measured = [
        Measured(
            k=k,
            figures={
                key: _ngram_speedup(evaluation, k) if key == "ngram_speedup" else _number(result.figure(key))
                for key, _ in COMPARED_MEASURES
            },
            per_position=list(result.per_position),
        )
        for evaluation in ([evaluation] if evaluation else [])
        for k, result in evaluation.results_by_k().items()
    ]
    return RunFigures(
        run_id=run_id,
        outcome=headline(record.state, record.deploy),
        sizes=record.state.get("sizes") or record.meta.get("sizes") or {},
        evaluation=measured,
        training=training_curve(record),
    )


def _ngram_speedup(evaluation: Evaluation, k: str) -> float | None:
    """n-gram speculation's speedup at `k`, where the evaluation measured it (the same prompts and flags)."""
    ngram = evaluation.ngram_at(k)
    return _number(ngram.speedup) if ngram is not None else None


def training_curve(record: RunRecord) -> Curve:
    """The drafter's metrics.jsonl rows when the run read them, else the train job's progress lines (as the run's
    own report falls back to them)."""
    rows = (record.state.get("training") or {}).get("train") or []
    if rows:
        return Curve(
            steps=[float(row["step"]) for row in rows],
            loss=[_number(row.get("loss")) for row in rows],
            tokens_per_s=[_number(row.get("tokens_per_s")) for row in rows],
            source="metrics.jsonl",
        )
    logged = [row for row in record.job_progress("train") if row.get("phase") == "train" and "loss" in row]
    if not logged:
        return Curve()
    return Curve(
        steps=[float(row["done"]) for row in logged],
        loss=[_number(row.get("loss")) for row in logged],
        tokens_per_s=[_number(row.get("tokens_per_s")) for row in logged],
        source="the job log",
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def size_rows(runs: Sequence[RunFigures]) -> list[tuple[str, list[Any], bool]]:
    """Each size any run has: its name, each run's value (None where a run lacks it), and whether they differ."""
    names = list(dict.fromkeys(name for run in runs for name in run.sizes))
    rows = []
    for name in names:
        values = [run.sizes.get(name) for run in runs]
        rows.append((name, values, len({repr(value) for value in values}) > 1))
    return rows


def final_loss(curve: Curve) -> float | None:
    return next((value for value in reversed(curve.loss) if value is not None), None)


def mean_tokens_per_s(curve: Curve) -> float | None:
    values = [value for value in curve.tokens_per_s if value is not None]
    return sum(values) / len(values) if values else None


def shown(value: Any) -> str:
    """A value as the comparison's tables write it: floats to 3 decimals, a switch as yes or no, missing as a dash."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return "—" if value is None else str(value)


def positions_text(per_position: Sequence[float]) -> str:
    return ", ".join(f"{position + 1}: {rate:.3f}" for position, rate in enumerate(per_position)) or "—"


def comparison_markdown(runs: Sequence[RunFigures]) -> str:
    """The comparison as markdown: outcomes, sizes (a differing one marked), evaluation and training side by side."""
    ids = [run.run_id for run in runs]
    lines = [f"# eyas runs compared: {', '.join(ids)}", "", "| run | outcome |", "| --- | --- |"]
    lines += [f"| {run.run_id} | {_cell(run.outcome)} |" for run in runs]
    lines += ["", "## Sizes", "", "| size | " + " | ".join(ids) + " |", "| --- |" + " --- |" * len(ids)]
    for name, values, differs in size_rows(runs):
        label = f"**{name}** (differs)" if differs else name
        lines.append(f"| {label} | " + " | ".join(_cell(shown(value)) for value in values) + " |")
    lines += ["", "## Evaluation", ""]
    headers = ["run", "k", *(label for _, label in COMPARED_MEASURES), "acceptance by position"]
    lines += ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    for run in runs:
        if not run.evaluation:
            lines.append(f"| {run.run_id} | not evaluated |" + " |" * (len(headers) - 2))
        for result in run.evaluation:
            figures = [shown(result.figures.get(key)) for key, _ in COMPARED_MEASURES]
            cells = [run.run_id, result.k, *figures, positions_text(result.per_position)]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Training", "", "| run | steps | final loss | mean tokens/s | from |", "|" + " --- |" * 5]
    for run in runs:
        curve = run.training
        lines.append(
            f"| {run.run_id} | {len(curve.steps) or '—'} | {shown(final_loss(curve))} | "
            f"{shown(mean_tokens_per_s(curve))} | {curve.source or 'no curves'} |"
        )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text in a markdown table cell: a pipe would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")
