"""Deploy: the evaluation's winner into production (the trained drafter or vLLM's n-gram speculation, at the k that
won: graph/phases/deploy/tournament.py), the runbook's last step, behind its own gate (graph/gates/deploy.py). Where
nothing beat the target alone, no gate is asked and production is left alone; the outcome names the candidate that
came closest.

The deploy node does what `eyas deploy RUN` does (tools/service/deploy.py): measure production, restart it with the
winner, measure again from its own /metrics, and keep it or roll back. Before it touches production it leaves
graph/downtime.py's record naming the drop-in: a run that dies mid-deploy is rolled back by `eyas resume` before
anything else, and the deploy node, run again, deploys from a clean production.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.downtime import RECORD, log_stop, restore, stop_start_commands, summary, write_record
from eyas.graph.phases.deploy.record import DEPLOY_FILE, deploy_record
from eyas.graph.phases.deploy.tournament import Tournament, winner_config
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.graph.phases.plan.node import production_load
from eyas.graph.policy import Policy, deploy_tournament
from eyas.graph.run_facts import run_facts
from eyas.graph.runs import RunDir
from eyas.graph.state import DeployOutcome, DeployStatus, RunState, run_plan, run_sizes
from eyas.tools.checks.compat import K_PER_BATCH_SIZE, path_works
from eyas.tools.errors import EyasError
from eyas.tools.private_files import write_private
from eyas.tools.service.base import Service, ServiceError
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import deploy, drop_in_text, share_drafter_command
from eyas.tools.service.deploy_result import NOT_DEPLOYED_YET, DeployResult
from eyas.tools.service.keep_rule import method_words
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.workloads.speculative import DRAFTER_METHOD, drafter_config


def run_policy(ctx: RunContext) -> Policy:
    """The run's policy; a run without one (a person at the terminal) has the defaults' thresholds and mode."""
    return ctx.policy or Policy()


def read_evaluation(ctx: RunContext, state: RunState) -> dict[str, Any] | None:
    """evaluation.json as the evaluate phase wrote it on the host (the run's state holds it only from the report
    on), None before the phase ran or when it is not there."""
    path = ctx.artifact("evaluation")
    ran = run_facts(state).ran("evaluate")
    return json.loads(ctx.host.read_text(path)) if ran and ctx.host.exists(path) else None


class Proposal(NamedTuple):
    """What the deploy puts into production: the winner's --speculative-config (None: nothing beat the target
    alone), the tournament that chose it (None before the evaluation: the dry run proposes the drafter at the run's
    k), and n-gram's evaluated speedup at a winning drafter's k (production's counters must beat it by the margin)."""

    speculative: dict[str, Any] | None
    tournament: Tournament | None
    ngram_speedup: float | None


def proposal(ctx: RunContext, state: RunState, evaluation: Mapping[str, Any] | None) -> Proposal:
    """The evaluation's winner by the run's policy, as the gate shows it and the deploy node deploys it."""
    drafter = run_facts(state).artifact("drafter") or ctx.artifact("drafter")
    sizes = run_sizes(state)
    found = deploy_tournament(run_policy(ctx), evaluation, sizes.concurrency)
    if found is None:
        return Proposal(drafter_config(drafter, sizes.num_speculative_tokens), None, None)
    winner = found.choice.winner
    ngram = Evaluation.model_validate(evaluation).ngram_at(winner.k) if winner.method == DRAFTER_METHOD else None
    schedule = found.k_schedule() if varies_k(state) else None
    return Proposal(winner_config(winner, drafter, schedule), found, ngram.speedup if ngram else None)


def varies_k(state: RunState) -> bool:
    """Whether production's vLLM can draft a k per batch size (verify's compat probe of the host)."""
    return path_works(run_facts(state).compat, "deploy", K_PER_BATCH_SIZE)


def planned_change(ctx: RunContext, speculative: dict[str, Any], state: RunState) -> tuple[Service, DeployResult]:
    """The production service and the change a deploy makes to it (not made yet): the drop-in and both argvs.
    Refused, before anything is touched, when the run's plan says production cannot serve an EAGLE-3 drafter here
    (its deploy path, from verify's compat rows: vLLM's eagle3 method and the target architecture's EAGLE-3
    support, which vLLM itself checks only after a restart has loaded the weights), or when eyas's drop-in is there
    already (a drafter deployed and not rolled back)."""
    planned = run_plan(state).paths.get("deploy")
    if planned is not None and planned.blocked:
        raise ServiceError(planned.blocked)
    service = production_service(ctx.config, ctx.host, ctx.http, ctx.clock)
    unit = service.effective_unit()
    path = service.drop_in_path()
    if service.host.exists(path):
        raise ServiceError(
            f"A drafter is deployed already ({path} exists): run `eyas rollback RUN` for the run that deployed it, "
            "then `eyas deploy RUN` for this one."
        )
    text, argv = drop_in_text(unit, speculative)
    share = share_drafter_command(unit, speculative["model"]) if "model" in speculative else None
    return service, DeployResult(kept=False, reason=NOT_DEPLOYED_YET, drop_in=path, drop_in_text=text,
                                 share_drafter=share, argv_before=unit.exec_start,
                                 argv_deployed=argv)  # fmt: skip


def expected_restart(ctx: RunContext, state: RunState) -> tuple[float, str]:
    """Seconds one restart keeps production down: its last start-to-healthy time (a stop this run measured, else
    the plan's load time, else target.load_time_s or a guess)."""
    production = run_facts(state).production
    measured = production is not None and production.last_load_s() is not None
    planned = run_plan(state).production_load
    if not measured and planned is not None and planned.load_s:
        return planned.load_s, planned.source
    return production_load(ctx, state, None)


def steps(
    ctx: RunContext, planned: DeployResult, thresholds: Thresholds, ngram_speedup: float | None,
    ngram_to_come: bool = False, method: str = DRAFTER_METHOD,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """The exact deploy, and the exact rollback (after a failed measure or a start that fails, or by hand)."""
    stop, start = stop_start_commands(ctx)
    reload = ["systemctl daemon-reload"] if ctx.config.target.unit else []
    rule = thresholds.keep_rule(ngram_speedup, method).sentence(ngram_to_come)
    probe = f"{thresholds.probe_requests} probe requests at temperature 0; acceptance from production's /metrics"
    deploy_steps = [
        f"measure production: {probe}",
        *([planned.share_drafter] if planned.share_drafter else []),
        f"umask 077; cat > {shlex.quote(planned.drop_in)} <<'EOF'\n{planned.drop_in_text}EOF",  # owner-only, as written
        *reload,
        stop,
        f"{start}; then wait for the deep health check",
        f"measure again ({probe}); keep {method_words(method)} at {rule}, else roll back",
    ]
    return deploy_steps, rollback_steps(ctx, planned.drop_in)


def rollback_steps(ctx: RunContext, drop_in: str) -> list[str]:
    """The exact rollback: remove eyas's drop-in, restart, check production runs its old argv."""
    stop, start = stop_start_commands(ctx)
    reload = ["systemctl daemon-reload"] if ctx.config.target.unit else []
    return [
        f"rm -f -- {shlex.quote(drop_in)}",
        *reload,
        stop,
        f"{start}; then wait for the deep health check and check it runs its old argv",
    ]


def outcome(status: DeployStatus, reason: str, drafter: str | None, argv: list[str]) -> DeployOutcome:
    """A deploy that did not change production (rejected, skipped, refused)."""
    return DeployOutcome(status=status, reason=reason, drafter=drafter, mean_acceptance_length=None,
                         acceptance_rate=None, tokens_per_s_before=None, tokens_per_s_after=None, downtime_s=None,
                         argv_before=argv, argv_after=argv)  # fmt: skip


def ended_with(ended: DeployOutcome) -> dict[str, Any]:
    """The state update that records how the deploy ended (its JSON: the state holds plain JSON)."""
    return {"deploy": ended.model_dump(mode="json")}


def measured_outcome(result: DeployResult, drafter: str) -> DeployOutcome:
    """The outcome of a deploy that restarted production: what its own counters measured, and what it runs now."""
    after = result.after
    return DeployOutcome(
        status="kept" if result.kept else "rolled_back", reason=result.reason, drafter=drafter,
        mean_acceptance_length=after.mean_acceptance_length if after else None,
        acceptance_rate=after.acceptance_rate if after else None,
        tokens_per_s_before=result.before.tokens_per_s if result.before else None,
        tokens_per_s_after=after.tokens_per_s if after else None, downtime_s=result.downtime_s,
        argv_before=result.argv_before, argv_after=result.argv_deployed if result.kept else result.argv_before,
    )  # fmt: skip


def deploy_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Deploy the approved winner (the gate's). Run again after a crash (production rolled back by `eyas resume`
    first), it deploys again, unless its saved result still describes production."""
    ctx = runtime.context
    drafter = run_facts(state).artifacts["drafter"]  # the train phase's: the deploy runs only after it
    saved = saved_result(ctx)
    if saved is not None:
        return _ended(ctx, measured_outcome(saved, drafter))
    proposed = proposal(ctx, state, read_evaluation(ctx, state))
    try:
        if proposed.speculative is None:
            raise EyasError("nothing beat the target alone in the evaluation")
        service, planned = planned_change(ctx, proposed.speculative, state)
    except EyasError as exc:
        ctx.on_note(f"deploy: not deployed: {exc}")
        return _ended(ctx, outcome("failed", f"not deployed, production untouched: {exc}", drafter, []))
    write_record(ctx, service, "deploy", planned)
    stopped_at = ctx.clock.now()
    try:
        result = deploy(service, ctx.config.target, ctx.http, ctx.clock, proposed.speculative,
                        run_policy(ctx).deploy_thresholds(), ctx.on_note, proposed.ngram_speedup)  # fmt: skip
    except ServiceError as exc:
        # Production did not answer before the change, or the deploy's own rollback failed: roll back from the
        # record (if that fails too, the record stays for `eyas resume`).
        restore(ctx, f"the deploy failed: {exc}")
        failed = outcome("failed", f"the deploy failed and was rolled back: {exc}", drafter, planned.argv_before)
        return _ended(ctx, failed)
    save_result(ctx.run, result)
    method = method_words(proposed.speculative["method"])
    verdict = f"{method} kept" if result.kept else f"{method} rolled back"
    log_stop(ctx, {"phase": "deploy", "service": service.name, "backend": service.backend,
                   "stopped_at": stopped_at, "healthy_at": ctx.clock.now(), "downtime_s": result.downtime_s or 0.0,
                   "load_s": result.rollback_restart_s or result.restart_s,
                   "restarted_because": f"deploy: {verdict}: {result.reason}"})  # fmt: skip
    (ctx.run.root / RECORD).unlink(missing_ok=True)
    ctx.on_note(f"deploy: {verdict}: {result.reason}")
    return _ended(ctx, measured_outcome(result, drafter))


def _ended(ctx: RunContext, ended: DeployOutcome) -> dict[str, Any]:
    return {"phase": "deploy", **ended_with(ended), "production": summary(ctx.run)}


def save_result(run: RunDir, result: DeployResult) -> None:
    """deploy.json: the whole result (both probes, the drop-in, both argvs), readable by the run's owner only."""
    write_private(run.root / DEPLOY_FILE, result.model_dump_json(indent=2) + "\n")


def saved_result(ctx: RunContext) -> DeployResult | None:
    """This run's saved deploy when it still describes production: kept with its drop-in in place, or rolled back
    with none; and no unfinished deploy on record."""
    result = deploy_record(ctx.run)
    if result is None or (ctx.run.root / RECORD).exists():
        return None
    present = ctx.host.exists(result.drop_in)
    matches = present and ctx.host.read_text(result.drop_in) == result.drop_in_text
    return result if (result.kept and matches) or (not result.kept and not present) else None
