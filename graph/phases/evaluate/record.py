"""What the evaluation measured, typed: evaluate.py's JSON (tools/workloads/evaluate.py writes it on the host), kept
in the run's state as that plain JSON and read back with `run_evaluation(state)` by the deploy gate, the policy, the
report, `eyas status` and the chat. A figure evaluate.py adds later is kept as it came (extra keys are allowed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

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


class Baseline(NamedTuple):
    """One of the three an evaluation measures side by side on the same prompts and server flags."""

    name: str
    measured: bool
    tokens_per_s: float | None = None
    mean_acceptance_length: float | None = None  # None for the target alone, and for speculation that drafted nothing
    speedup: float | None = None  # tokens/s over the target alone's

    def summary(self) -> str:
        """Its figures in words, as the deploy gate and `eyas status` show them beside its name."""
        if not self.measured:
            return f"{self.name} not measured"
        parts = [f"{self.tokens_per_s:.1f} tokens/s" if self.tokens_per_s is not None else "tokens/s not measured"]
        if self.name != TARGET_ALONE:
            acceptance = self.mean_acceptance_length
            parts.append(f"acceptance length {acceptance:.2f}" if acceptance is not None else "no drafts accepted")
            parts.append(f"speedup {self.speedup:.2f}x" if self.speedup is not None else "speedup not measured")
        return ", ".join(parts)


TARGET_ALONE, NGRAM, DRAFTER = "target alone", "n-gram", "drafter"

# Each measure's name in prose, for every table a person reads (the terminal's, the report's); its key is the JSON's.
MEASURE_LABELS = {
    "k": "speculative tokens (k)",
    "mean_acceptance_length": "mean acceptance length",
    "acceptance_rate": "acceptance rate",
    "tokens_per_s_baseline": "tokens/s without drafter",
    "tokens_per_s_speculative": "tokens/s with drafter",
    "speedup": "speedup",
    "outputs_identical": "outputs identical at temperature 0",
}


class SpeedDisagreement(Record):
    """Where the evaluation's speedup and vLLM's benchmark's disagree beyond their intervals: the sentence evaluate.py
    writes (tools/workloads/speed_agreement.py), naming both figures and why the evaluation decides."""

    model_config = ConfigDict(frozen=True, extra="allow")

    server: str | None = None
    note: str


class Evaluation(Record):
    """The drafter measured on held-out prompts at temperature 0: acceptance from vLLM's own counters, and decode
    speed with and without it (None where evaluate.py did not measure it, e.g. --acceptance-only); beside it, vLLM's
    n-gram speculation on the same prompts and flags (`ngram`, by k; absent where it was not measured)."""

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
    ngram: dict[str, Evaluation] | None = None  # evaluate.py --ngram: n-gram speculation at each k, no drafter
    measured: str | None = None  # "interleaved" (each prompt to every server in turn) or "in turn"; None: before it
    disagreement: list[SpeedDisagreement] = Field(default_factory=list)  # with the bench's speedup, where they differ

    def results_by_k(self) -> dict[str, Evaluation]:
        """The result at each k measured (one k: the evaluation itself)."""
        if self.by_k:
            return dict(self.by_k)
        return {str(self.k if self.k is not None else "?"): self}

    def ngram_at(self, k: int | str | None) -> Evaluation | None:
        """n-gram speculation measured at `k` (the drafter's own k: the fair comparison), None where it was not."""
        return (self.ngram or {}).get(str(k)) if k is not None else None

    def ngram_speedup(self) -> float | None:
        """n-gram speculation's speedup over the target alone at the drafter's k, None where not measured."""
        ngram = self.ngram_at(self.k)
        return ngram.speedup if ngram is not None else None

    def side_by_side(self) -> list[Baseline]:
        """The target alone, n-gram speculation and the drafter at the drafter's k, on the same prompts and flags;
        one not measured (--acceptance-only, an evaluation from before n-gram) says so."""
        ngram = self.ngram_at(self.k)
        return [
            Baseline(TARGET_ALONE, self.tokens_per_s_baseline is not None, self.tokens_per_s_baseline),
            Baseline(NGRAM, False) if ngram is None else Baseline(
                NGRAM, True, ngram.tokens_per_s_speculative, ngram.mean_acceptance_length, ngram.speedup
            ),
            Baseline(DRAFTER, True, self.tokens_per_s_speculative, self.mean_acceptance_length, self.speedup),
        ]  # fmt: skip

    def disagreement_notes(self) -> list[str]:
        """What every report shows beside the speedup where vLLM's benchmark measured another one."""
        return [found.note for found in self.disagreement]

    def figure(self, measure: str) -> Any:
        """One measure by name, as the tables list them (None when not measured)."""
        return getattr(self, measure, None)


def evaluated_ngram(evaluation: Mapping[str, Any] | None) -> float | None:
    """n-gram speculation's speedup in evaluate.py's JSON at the drafter's k (the deploy's bar); None where it was
    not measured."""
    return Evaluation.model_validate(evaluation).ngram_speedup() if evaluation else None


def run_evaluation(state: Mapping[str, Any]) -> Evaluation | None:
    """The run's evaluation, typed; None before the evaluate phase ended."""
    recorded = state.get("evaluation")
    return Evaluation.model_validate(recorded) if recorded else None
