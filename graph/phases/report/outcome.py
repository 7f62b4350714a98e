"""A run's outcome as data, for scripts: what production runs now and what its own counters measured, the report's
headline, and every method the evaluation measured. `eyas status --json`, `eyas runs --json` and `eyas report
--json` all print this one model, so an overnight script reads the same keys wherever it asks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.graph.phases.evaluate.record import DRAFTER, NGRAM, TARGET_ALONE, Evaluation, run_evaluation
from eyas.graph.phases.report.deploy_facts import DeployFacts, ScriptRecord, deploy_facts
from eyas.graph.phases.report.headline import headline
from eyas.graph.phases.report.next_step import run_next_steps
from eyas.tools.service.deploy_result import DeployResult


class MethodFigures(ScriptRecord):
    """One method the evaluation measured on the held-out prompts, with the same server flags as the others."""

    method: str  # "target alone", "drafter" or "n-gram" (graph/phases/evaluate/record.py)
    k: int | None  # None for the target alone
    tokens_per_s: float | None
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    speedup: float | None  # tokens/s over the target alone's
    speedup_interval: tuple[float, float] | None  # the bootstrap's, at its level (usually 95 %)


class RunOutcome(ScriptRecord):
    """The outcome of one run, as a script reads it."""

    headline: str
    # What would make production faster, in the order to take them (graph/phases/report/next_step.py): the first is
    # the next step. Empty where the drafter runs in production or nothing was evaluated yet.
    next_steps: list[str]
    deploy: DeployFacts
    evaluated: list[MethodFigures]  # empty before the evaluation ended


def run_outcome(state: Mapping[str, Any], deployed: DeployResult | None, min_speedup: float) -> RunOutcome:
    """The outcome from the run's state and its deploy.json (`deployed`, what `eyas deploy` or `eyas rollback` did
    last, which supersedes the deploy phase's own outcome, as in the headline); its next steps held to the
    deploy_min_speedup of the policy the run started with (`min_speedup`)."""
    return RunOutcome(
        headline=headline(state, deployed),
        next_steps=run_next_steps(state, deployed, min_speedup),
        deploy=deploy_facts(state, deployed),
        evaluated=evaluated_methods(run_evaluation(state)),
    )


def evaluated_methods(evaluation: Evaluation | None) -> list[MethodFigures]:
    """The target alone, then the drafter at each k measured, then n-gram speculation at each k measured."""
    if evaluation is None:
        return []
    alone = MethodFigures(method=TARGET_ALONE, k=None, tokens_per_s=evaluation.tokens_per_s_baseline,
                          mean_acceptance_length=None, acceptance_rate=None, speedup=None,
                          speedup_interval=None)  # fmt: skip
    drafters = [_speculated(DRAFTER, result) for result in evaluation.results_by_k().values()]
    ngrams = [_speculated(NGRAM, result) for result in (evaluation.ngram or {}).values()]
    return [alone, *drafters, *ngrams]


def _speculated(method: str, result: Evaluation) -> MethodFigures:
    return MethodFigures(
        method=method,
        k=result.k,
        tokens_per_s=result.tokens_per_s_speculative,
        mean_acceptance_length=result.mean_acceptance_length,
        acceptance_rate=result.acceptance_rate,
        speedup=result.speedup,
        speedup_interval=result.intervals.of("speedup") if result.intervals else None,
    )
