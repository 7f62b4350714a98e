"""A run's outcome as data, for scripts: what production runs now and what its own counters measured, the report's
headline, and every method the evaluation measured. `eyas status --json`, `eyas runs --json` and `eyas report
--json` all print this one model, so an overnight script reads the same keys wherever it asks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from eyas.graph.phases.evaluate.record import DRAFTER, NGRAM, TARGET_ALONE, Evaluation, run_evaluation
from eyas.graph.phases.report.headline import headline
from eyas.graph.run_facts import run_facts
from eyas.graph.state import DeployStatus
from eyas.tools.launch.unit_file import parse_vllm_argv
from eyas.tools.service.deploy_result import DeployResult

NOT_DEPLOYED = "not_deployed"
DeployEnding = DeployStatus | Literal["not_deployed"]


class ScriptRecord(BaseModel):
    """JSON a script reads: every key always there (null where unknown), none beyond them."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ProductionFigures(ScriptRecord):
    """Production measured by its own counters over the deploy's probe requests, before and with the drafter."""

    tokens_per_s_before: float | None
    tokens_per_s_after: float | None
    speedup: float | None  # after over before
    mean_acceptance_length: float | None  # with the drafter
    acceptance_rate: float | None


class DeployFacts(ScriptRecord):
    """What the deploy did: kept or rolled back (production's verdict), rejected at the gate, skipped by the policy,
    failed, or not deployed (the run never reached it); which speculation and k it put in or tried."""

    status: DeployEnding
    reason: str | None
    method: str | None
    k: int | None
    drafter: str | None
    production: ProductionFigures | None  # None where production was not restarted with the drafter


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
    deploy: DeployFacts
    evaluated: list[MethodFigures]  # empty before the evaluation ended


def run_outcome(state: Mapping[str, Any], deployed: Mapping[str, Any] | None) -> RunOutcome:
    """The outcome from the run's state and its deploy.json (`deployed`, what `eyas deploy` or `eyas rollback` did
    last, which supersedes the deploy phase's own outcome, as in the headline)."""
    return RunOutcome(
        headline=headline(state, deployed),
        deploy=deploy_facts(state, deployed),
        evaluated=evaluated_methods(run_evaluation(state)),
    )


def deploy_facts(state: Mapping[str, Any], deployed: Mapping[str, Any] | None) -> DeployFacts:
    if deployed is not None and deployed.get("reason") != "not deployed yet":
        return _from_result(DeployResult.model_validate(deployed))
    run = run_facts(state)
    phase = run.deploy
    if phase is None:
        return DeployFacts(status=NOT_DEPLOYED, reason=None, method=None, k=None, drafter=None, production=None)
    restarted = phase.restarted
    # What production runs now names the method and k kept; a rollback left production as it was, so the method tried
    # is not in its argv, and the run's own k is the drafter's.
    served = parse_vllm_argv(phase.argv_after)
    kept = (served.speculative_config if served is not None else None) or {}
    k = int(kept.get("num_speculative_tokens") or run.sizes.num_speculative_tokens)
    before, after = phase.tokens_per_s_before, phase.tokens_per_s_after
    production = ProductionFigures(
        tokens_per_s_before=before,
        tokens_per_s_after=after,
        speedup=after / before if before and after is not None else None,
        mean_acceptance_length=phase.mean_acceptance_length,
        acceptance_rate=phase.acceptance_rate,
    )
    return DeployFacts(
        status=phase.status,
        reason=phase.reason,
        method=str(kept["method"]) if kept.get("method") else None,
        k=k if restarted else None,
        drafter=phase.drafter,
        production=production if restarted else None,
    )


def _from_result(result: DeployResult) -> DeployFacts:
    served = parse_vllm_argv(result.argv_deployed)
    speculative = (served.speculative_config if served is not None else None) or {}
    k = speculative.get("num_speculative_tokens")
    return DeployFacts(
        status="kept" if result.kept else "rolled_back",
        reason=result.reason,
        method=speculative.get("method"),
        k=int(k) if k is not None else None,
        drafter=speculative.get("model"),
        production=ProductionFigures(
            tokens_per_s_before=result.before.tokens_per_s if result.before else None,
            tokens_per_s_after=result.after.tokens_per_s if result.after else None,
            speedup=result.speedup,
            mean_acceptance_length=result.after.mean_acceptance_length if result.after else None,
            acceptance_rate=result.after.acceptance_rate if result.after else None,
        ),
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
