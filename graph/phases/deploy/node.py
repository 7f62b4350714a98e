"""Deploy: the evaluation's winner into production (the trained drafter or vLLM's n-gram speculation, at the k that
won: graph/phases/deploy/tournament.py), the runbook's last step, behind its own gate. Where nothing beat the target
alone, no gate is asked and production is left alone; the outcome names the candidate that came closest.

The gate shows what an operator woken at 3 a.m. decides on: the winner and every candidate's figures, the
evaluation's acceptance length and speedup (with their intervals) against the thresholds and beside the baselines
(the target alone, vLLM's n-gram speculation),
production's exact argv before and after (only its --speculative-config is set), the expected downtime
(production's last start-to-healthy time) and what a rollback does. The deploy node then does what `eyas deploy
RUN` does (tools/service/deploy.py): measure production, restart it with the drafter, measure again from its own
/metrics, and keep the drafter or roll back. Before it touches production it leaves graph/downtime.py's record
naming the drop-in: a run that dies mid-deploy is rolled back by `eyas resume` before anything else, and the
deploy node, run again, deploys from a clean production.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from eyas.graph.context import RunContext
from eyas.graph.downtime import RECORD, log_stop, restore, stop_start_commands, summary, write_record
from eyas.graph.phases.deploy.record import DEPLOY_FILE
from eyas.graph.phases.deploy.tournament import Tournament, winner_config
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.graph.phases.plan.node import production_load
from eyas.graph.policy import Policy, deploy_tournament, judge_deploy
from eyas.graph.runs import RunDir
from eyas.graph.state import DeployOutcome, DeployStatus, GateAnswer, RunState, run_plan, run_sizes
from eyas.tools.errors import EyasError
from eyas.tools.private_files import write_private
from eyas.tools.service.base import Service, ServiceError
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import deploy, drop_in_text, share_drafter_command
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.keep_rule import method_words
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.workloads.speculative import DRAFTER_METHOD, drafter_config

CHOICES = ("approve", "reject")  # an edit has nothing to change here
EVALUATION_SHOWN = ("mean_acceptance_length", "acceptance_rate", "speedup", "k", "prompts", "outputs_identical",
                    "intervals")  # fmt: skip


def run_policy(ctx: RunContext) -> Policy:
    """The run's policy; a run without one (a person at the terminal) has the defaults' thresholds and mode."""
    return ctx.policy or Policy()


def read_evaluation(ctx: RunContext, state: RunState) -> dict[str, Any] | None:
    """evaluation.json as the evaluate phase wrote it on the host (the run's state holds it only from the report
    on), None before the phase ran or when it is not there."""
    path = ctx.artifact("evaluation")
    ran = "evaluate" in state.get("jobs", {})
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
    drafter = state.get("artifacts", {}).get("drafter") or ctx.artifact("drafter")
    sizes = run_sizes(state)
    found = deploy_tournament(run_policy(ctx), evaluation, sizes.concurrency)
    if found is None:
        return Proposal(drafter_config(drafter, sizes.num_speculative_tokens), None, None)
    winner = found.choice.winner
    ngram = Evaluation.model_validate(evaluation).ngram_at(winner.k) if winner.method == DRAFTER_METHOD else None
    return Proposal(winner_config(winner, drafter), found, ngram.speedup if ngram else None)


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
    return service, DeployResult(kept=False, reason="not deployed yet", drop_in=path, drop_in_text=text,
                                 share_drafter=share, argv_before=unit.exec_start,
                                 argv_deployed=argv)  # fmt: skip


def expected_restart(ctx: RunContext, state: RunState) -> tuple[float, str]:
    """Seconds one restart keeps production down: its last start-to-healthy time (a stop this run measured, else
    the plan's load time, else target.load_time_s or a guess)."""
    measured = any(stop.get("load_s") for stop in state.get("production", {}).get("stops", []))
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


def _figures(evaluation: dict[str, Any] | None, policy: Policy, restart_s: float, source: str) -> dict[str, Any]:
    """The gate's numbers, side by side with the thresholds the deployed drafter is held to."""
    evaluation = evaluation or {}
    intervals = evaluation.get("intervals") or {}

    def measured(key: str, unit: str = "") -> str:
        value, bounds = evaluation.get(key), intervals.get(key)
        if value is None:
            return "not measured"
        shown = f"{value:.3f}{unit}"
        if bounds and None not in bounds:
            shown += f" ({intervals.get('level', 0.95):.0%} interval {bounds[0]:.3f}-{bounds[1]:.3f})"
        return shown

    return {
        "evaluation mean acceptance length": measured("mean_acceptance_length"),
        "threshold mean acceptance length": policy.deploy_min_acceptance_length,
        "evaluation speedup": measured("speedup", "x"),
        "threshold speedup": f"{policy.deploy_min_speedup:g}x",
        **baselines(evaluation),
        "threshold over n-gram": f"n-gram's speedup + {policy.deploy_ngram_margin:g}",
        "expected downtime": f"{restart_s:.0f} s per restart ({source}); a rollback restarts once more",
    }


def baselines(evaluation: dict[str, Any]) -> dict[str, str]:
    """The three measured side by side on the same prompts and flags: the target alone, n-gram speculation, the
    drafter."""
    if not evaluation:
        return {}
    return {f"evaluation {row.name}": row.summary() for row in Evaluation.model_validate(evaluation).side_by_side()}


def deploy_view(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """What the deploy gate shows (and `eyas run --dry-run` lists): the winner beside every candidate, the numbers,
    the change, the downtime, the rollback. A deploy that cannot happen says why instead of its change; where
    nothing beat the target alone, `nothing_pays` says which came closest and why."""
    policy = run_policy(ctx)
    thresholds = policy.deploy_thresholds()
    evaluation = read_evaluation(ctx, state)
    drafter = state.get("artifacts", {}).get("drafter") or ctx.artifact("drafter")
    proposed = proposal(ctx, state, evaluation)
    restart_s, source = expected_restart(ctx, state)
    speculative = proposed.speculative
    change: dict[str, Any] = {"drafter": drafter, "k": speculative["num_speculative_tokens"] if speculative else None,
                              "speculative_config": speculative, "thresholds": thresholds.model_dump(),
                              "expected_downtime_s": restart_s, "downtime_source": source}  # fmt: skip
    view: dict[str, Any] = {"kind": "gate", "phase": "deploy", "host": ctx.host.name, "choices": list(CHOICES),
                            "estimate": _figures(evaluation, policy, restart_s, source)}  # fmt: skip
    if proposed.tournament is not None:
        choice = proposed.tournament.choice
        change.update(winner=choice.winner.name, winner_reason=choice.reason, candidates=proposed.tournament.rows(),
                      disagreement=proposed.tournament.disagreement())  # fmt: skip
        view["estimate"]["evaluation winner"] = f"{choice.winner.name}: {choice.reason}"
        view["estimate"].update({f"candidate {name}": text for name, text in proposed.tournament.rows().items()})
        view["estimate"]["concurrencies disagree"] = proposed.tournament.disagreement()  # None: not shown
    try:
        if speculative is None:
            raise EyasError("nothing to deploy")
        service, planned = planned_change(ctx, speculative, state)
    except EyasError as exc:
        if speculative is None:
            change["nothing_pays"] = change["winner_reason"]
        else:
            change["error"] = f"the deploy cannot be made: {exc}"
        view["commands"] = []
    else:
        to_come = evaluation is None and run_sizes(state).eval_ngram  # the dry run, before the evaluation
        method = speculative["method"]
        deploy_steps, rollback_steps = steps(ctx, planned, thresholds, proposed.ngram_speedup, to_come, method)
        gpus = [gpu["index"] for gpu in (state.get("gpus") or {}).get("gpus", []) if gpu.get("production")]
        change.update(service=service.name, backend=service.backend, drop_in=planned.drop_in,
                      drop_in_text=planned.drop_in_text, argv_before=planned.argv_before,
                      argv_after=planned.argv_deployed, rollback=rollback_steps)  # fmt: skip
        view["commands"] = deploy_steps
        view["production"] = {
            "deploy": {
                "action": "restart",
                "downtime_hours": restart_s / 3600,
                "gpus": gpus,
                "reason": f"{service.name} ({service.backend}) restarts with {method_words(method)}; if production's "
                "own counters miss the thresholds, or it does not come up or answer, eyas rolls back (a second "
                "restart) with:",
                "commands": rollback_steps,
                "servers": {"servers": {"before": planned.argv_before, "after": planned.argv_deployed}},
            }
        }
    view["deploy"] = change
    if evaluation is not None:
        view["deploy"]["evaluation"] = {key: evaluation.get(key) for key in EVALUATION_SHOWN}
        view["deploy"]["evaluation"]["ngram"] = evaluation.get("ngram")
    if ctx.policy is not None:
        verdict = judge_deploy(policy, evaluation, run_sizes(state).concurrency)
        if "error" in change:
            verdict = verdict.model_copy(update={"approve": False, "reasons": [change["error"], *verdict.reasons]})
        view["policy"] = {"approve": verdict.approve, "reasons": verdict.summary}
    return view


def outcome(status: DeployStatus, reason: str, drafter: str | None, argv: list[str]) -> DeployOutcome:
    """A deploy that did not change production (rejected, skipped, refused)."""
    return DeployOutcome(status=status, reason=reason, drafter=drafter, mean_acceptance_length=None,
                         acceptance_rate=None, tokens_per_s_before=None, tokens_per_s_after=None, downtime_s=None,
                         argv_before=argv, argv_after=argv)  # fmt: skip


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


def gate_deploy(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask before production changes. A "skip" policy has no deploy phase; "auto" approves by the thresholds."""
    ctx = runtime.context
    if run_policy(ctx).deploy == "skip":
        reason = 'the policy\'s deploy = "skip"; `eyas deploy RUN` puts the drafter into production by hand'
        return {"deploy": outcome("skipped", reason, state.get("artifacts", {}).get("drafter"), [])}
    view = ctx.boundary.node("gate_deploy", lambda s, r: deploy_view(r.context, s), state, runtime)
    if view["deploy"].get("nothing_pays"):  # nothing to ask: production stays as it is
        reason = f"{view['deploy']['nothing_pays']}; production untouched"
        ctx.on_note(f"deploy: not deployed: {reason}")
        return {"deploy": outcome("skipped", reason, view["deploy"]["drafter"], [])}
    policy = view.get("policy")
    if policy and policy["approve"]:
        return {"decisions": [GateAnswer(action="approve", reason=policy["reasons"], who="policy").decision("deploy")]}
    answer = GateAnswer.model_validate(interrupt(view))
    if answer.action not in CHOICES:
        raise ValueError(f"The deploy gate takes {' or '.join(CHOICES)}, got {answer.action!r}.")
    update: dict[str, Any] = {"decisions": [answer.decision("deploy")]}
    if answer.action == "reject":
        argv = view["deploy"].get("argv_before", [])
        reason = f"rejected at the deploy gate: {answer.reason or 'no reason given'}; production untouched"
        update["deploy"] = outcome("rejected", reason, view["deploy"]["drafter"], argv)
    return update


def after_deploy_gate(state: RunState) -> Literal["deploy", "report"]:
    decision = state["decisions"][-1] if state.get("decisions") else None
    approved = decision is not None and decision["gate"] == "deploy" and decision["action"] == "approve"
    return "deploy" if approved and "deploy" not in state else "report"


def deploy_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Deploy the approved winner (the gate's). Run again after a crash (production rolled back by `eyas resume`
    first), it deploys again, unless its saved result still describes production."""
    ctx = runtime.context
    drafter = state["artifacts"]["drafter"]
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
    return {"phase": "deploy", "deploy": ended, "production": summary(ctx.run)}


def save_result(run: RunDir, result: DeployResult) -> None:
    """deploy.json: the whole result (both probes, the drop-in, both argvs), readable by the run's owner only."""
    write_private(run.root / DEPLOY_FILE, result.model_dump_json(indent=2) + "\n")


def saved_result(ctx: RunContext) -> DeployResult | None:
    """This run's saved deploy when it still describes production: kept with its drop-in in place, or rolled back
    with none; and no unfinished deploy on record."""
    path = ctx.run.root / DEPLOY_FILE
    if not path.exists() or (ctx.run.root / RECORD).exists():
        return None
    result = DeployResult.model_validate(json.loads(path.read_text()))
    present = ctx.host.exists(result.drop_in)
    matches = present and ctx.host.read_text(result.drop_in) == result.drop_in_text
    return result if (result.kept and matches) or (not result.kept and not present) else None
