"""What the evaluation measured, typed: evaluate.py's JSON (tools/workloads/evaluate.py writes it on the host), kept
in the run's state as that plain JSON and read back with `run_evaluation(state)` by the deploy gate, the policy, the
report, `eyas status` and the chat. A figure evaluate.py adds later is kept as it came (extra keys are allowed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field

from eyas.graph.phases.evaluate.bench_record import Bench
from eyas.graph.state import Record

Bounds = list[float | None]  # a measure's confidence interval, [low, high]


class Intervals(Record):
    """Bootstrap confidence intervals over the held-out prompts, per measure."""

    model_config = ConfigDict(frozen=True, extra="allow")

    level: float = 0.95
    resamples: int | None = None
    prompts: int | None = None
    mean_acceptance_length: Bounds | None = None
    acceptance_rate: Bounds | None = None
    per_position: list[Bounds] = Field(default_factory=list)
    speedup: Bounds | None = None

    def of(self, measure: str) -> tuple[float, float] | None:
        """The interval of `measure` when both its bounds are known."""
        bounds = getattr(self, measure, None)
        if isinstance(bounds, list) and len(bounds) == 2 and None not in bounds:
            return float(bounds[0]), float(bounds[1])
        return None


class Evaluation(Record):
    """The drafter measured on held-out prompts at temperature 0: acceptance from vLLM's own counters, and decode
    speed with and without it (None where evaluate.py did not measure it, e.g. --acceptance-only)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    k: int | None = None
    mean_acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position: list[float] = Field(default_factory=list)
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    prompts: int | None = None
    tokens_per_s_speculative: float | None = None
    tokens_per_s_baseline: float | None = None
    speedup: float | None = None
    outputs_identical: bool | None = None
    intervals: Intervals | None = None
    drafter: str | None = None
    by_k: dict[str, Evaluation] | None = None  # several k measured: each one's result
    bench: Bench | None = None  # `vllm bench serve` at concurrency 1 and the run's (bench_record.py)

    def results_by_k(self) -> dict[str, Evaluation]:
        """The result at each k measured (one k: the evaluation itself)."""
        if self.by_k:
            return dict(self.by_k)
        return {str(self.k if self.k is not None else "?"): self}

    def figure(self, measure: str) -> Any:
        """One measure by name, as the tables list them (None when not measured)."""
        return getattr(self, measure, None)


def run_evaluation(state: Mapping[str, Any]) -> Evaluation | None:
    """The run's evaluation, typed; None before the evaluate phase ended."""
    recorded = state.get("evaluation")
    return Evaluation.model_validate(recorded) if recorded else None
