"""What a run's deploy did, as a script reads it: kept, rolled back, rejected, skipped, failed or never deployed; the
method and k it put in or tried; production's own figures before and with it. From the deploy phase's outcome in the
state, or from deploy.json where `eyas deploy` or `eyas rollback` acted since (which supersedes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

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


def deploy_facts(state: Mapping[str, Any], deployed: DeployResult | None) -> DeployFacts:
    if deployed is not None and deployed.acted:
        return _from_result(deployed)
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
