"""The evaluation as `eyas run` prints it when the run ends: the drafter's figures with the baselines beside it, and
vLLM's benchmark under load, the same tables both reports show, for the operator who reads the terminal first."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from eyas.graph.phases.evaluate.bench_record import LATENCY_HEADERS, Bench
from eyas.graph.phases.evaluate.record import MEASURE_LABELS, Evaluation
from eyas.tools.settings.units import figure

# What the rows of the target alone, n-gram and the drafter say (their tokens/s, acceptance length, speedup): each
# fact once on the run's last screen, not a second time above them with more digits.
SIDE_BY_SIDE = frozenset({"tokens_per_s_baseline", "tokens_per_s_speculative", "mean_acceptance_length", "speedup"})


def evaluation_table(evaluation: Evaluation) -> Table:
    table = Table(
        title="drafter measured on held-out prompts (temperature 0)", title_justify="left",
        caption=" ".join(evaluation.disagreement_notes()) or None, caption_justify="left",
    )  # fmt: skip
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, label in MEASURE_LABELS.items():
        value = evaluation.figure(key)
        if value is not None and key not in SIDE_BY_SIDE:
            table.add_row(label, shown_value(value))
    for row in evaluation.side_by_side():  # the baselines beside it, on the same prompts and flags
        table.add_row(row.name, row.summary())
    return table


def shown_value(value: Any) -> str:
    """A measure as a person reads it: a yes or a no, a count, or a figure to its significant digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return figure(value) if isinstance(value, float) else str(value)


def latency_table(bench: Bench) -> Table:
    """vLLM's benchmark on the evaluation's servers: where a drafter's extra compute costs more than it saves shows
    at the run's concurrency, not in one request at a time. Its caption says what ran (or why nothing did)."""
    table = Table(
        title="latency under load (vllm bench serve)", title_justify="left", caption=bench.caption(),
        caption_justify="left",
    )  # fmt: skip
    for header in LATENCY_HEADERS:
        table.add_column(header, justify="left" if header == "server" else "right")
    for row in bench.rows():
        table.add_row(*row)
    return table
