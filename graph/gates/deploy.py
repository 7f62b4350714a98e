"""The deploy gate: asks before production changes, showing what an operator woken at 3 a.m. decides on. The winner
and every candidate's figures, the evaluation's acceptance length and speedup (with their intervals) against the
thresholds and beside the baselines (the target alone, vLLM's n-gram speculation), production's exact argv before
and after (only its --speculative-config is set), the expected downtime (production's last start-to-healthy time)
and what a rollback does. Where nothing beat the target alone, it asks nothing and production is left alone; a
"skip" policy has no deploy phase; "auto" approves by the thresholds. The deploy itself is
graph/phases/deploy/node.py's.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from eyas.graph.context import RunContext
from eyas.graph.gates.deploy_change import DeployChange, DeployEvaluation
from eyas.graph.gates.view import Figure, GatePolicy, GateView, ProductionEntry, Servers
from eyas.graph.phases.deploy.node import (
    ended_with,
    expected_restart,
    outcome,
    planned_change,
    proposal,
    read_evaluation,
    run_policy,
    steps,
    varies_k,
)
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.graph.policy import Policy, judge_deploy
from eyas.graph.run_facts import run_facts
from eyas.graph.state import ApprovalAction, GateAnswer, RunState
from eyas.tools.errors import EyasError
from eyas.tools.service.keep_rule import method_words

CHOICES: tuple[ApprovalAction, ...] = ("approve", "reject")  # an edit has nothing to change here


def _figures(evaluation: Evaluation | None, policy: Policy, restart_s: float, source: str) -> dict[str, Figure]:
    """The gate's numbers, side by side with the thresholds the deployed method is held to."""

    def measured(key: str, unit: str = "") -> str:
        value = evaluation.figure(key) if evaluation is not None else None
        if not isinstance(value, int | float):
            return "not measured"
        shown = f"{value:.3f}{unit}"
        intervals = evaluation.intervals if evaluation is not None else None
        bounds = intervals.of(key) if intervals is not None else None
        if intervals is not None and bounds is not None:
            shown += f" ({intervals.level:.0%} interval {bounds[0]:.3f}-{bounds[1]:.3f})"
        return shown

    rows = evaluation.side_by_side() if evaluation is not None else []
    return {
        "evaluation mean acceptance length": measured("mean_acceptance_length"),
        "threshold mean acceptance length": policy.deploy_min_acceptance_length,
        "evaluation speedup": measured("speedup", "x"),
        "threshold speedup": f"{policy.deploy_min_speedup:g}x",
        **{f"evaluation {row.name}": row.summary() for row in rows},
        "threshold over n-gram": f"n-gram's speedup + {policy.deploy_ngram_margin:g}",
        "expected downtime": f"{restart_s:.0f} s per restart ({source}); a rollback restarts once more",
    }


def deploy_view(ctx: RunContext, state: RunState) -> GateView:
    """What the deploy gate shows (and `eyas run --dry-run` lists): the winner beside every candidate, the numbers,
    the change, the downtime, the rollback. A deploy that cannot happen says why instead of its change."""
    run = run_facts(state)
    policy = run_policy(ctx)
    thresholds = policy.deploy_thresholds()
    raw = read_evaluation(ctx, state)
    evaluation = Evaluation.model_validate(raw) if raw is not None else None
    proposed = proposal(ctx, state, raw)
    restart_s, source = expected_restart(ctx, state)
    speculative = proposed.speculative
    change: dict[str, Any] = {"drafter": run.artifact("drafter") or ctx.artifact("drafter"),
                              "k": speculative["num_speculative_tokens"] if speculative else None,
                              "speculative_config": speculative, "thresholds": thresholds,
                              "expected_downtime_s": restart_s, "downtime_source": source}  # fmt: skip
    figures = _figures(evaluation, policy, restart_s, source)
    if proposed.tournament is not None:
        choice = proposed.tournament.choice
        change.update(winner=choice.winner.name, winner_reason=choice.reason, candidates=proposed.tournament.rows(),
                      disagreement=proposed.tournament.disagreement())  # fmt: skip
        figures["evaluation winner"] = f"{choice.winner.name}: {choice.reason}"
        figures.update({f"candidate {name}": text for name, text in proposed.tournament.rows().items()})
        figures["concurrencies disagree"] = proposed.tournament.disagreement()  # None: not shown
        k_text = proposed.tournament.k_per_batch_size(varies_k(state))
        if k_text is not None:
            change["k_per_batch_size"] = figures["k per batch size"] = k_text
    parts: dict[str, Any] = {"commands": []}
    try:
        if speculative is None:
            raise EyasError("nothing to deploy")
        service, planned = planned_change(ctx, speculative, state)
    except EyasError as exc:
        if speculative is None:
            change["nothing_pays"] = change["winner_reason"]
        else:
            change["error"] = f"the deploy cannot be made: {exc}"
    else:
        to_come = raw is None and run.sizes.eval_ngram  # the dry run, before the evaluation
        method = speculative["method"]
        deploy_steps, rollback = steps(ctx, planned, thresholds, proposed.ngram_speedup, to_come, method)
        change.update(service=service.name, backend=service.backend, drop_in=planned.drop_in,
                      drop_in_text=planned.drop_in_text, argv_before=planned.argv_before,
                      argv_after=planned.argv_deployed, rollback=rollback)  # fmt: skip
        reason = (f"{service.name} ({service.backend}) restarts with {method_words(method)}; if production's own "
                  "counters miss the thresholds, or it does not come up or answer, eyas rolls back (a second "
                  "restart) with:")  # fmt: skip
        servers = Servers(servers={"before": planned.argv_before, "after": planned.argv_deployed})
        parts["commands"] = deploy_steps
        parts["production"] = {"deploy": ProductionEntry(action="restart", downtime_hours=restart_s / 3600,
                                                         gpus=run.gpus.production_held(), reason=reason,
                                                         commands=rollback, servers=servers)}  # fmt: skip
    if raw is not None:
        change["evaluation"] = DeployEvaluation(**{name: raw.get(name) for name in DeployEvaluation.model_fields})
    deploy = DeployChange(**change)
    if ctx.policy is not None:
        verdict = judge_deploy(policy, raw, run.sizes.concurrency)
        if deploy.error is not None:
            verdict = verdict.model_copy(update={"approve": False, "reasons": [deploy.error, *verdict.reasons]})
        parts["policy"] = GatePolicy(approve=verdict.approve, reasons=verdict.summary)
    return GateView(kind="gate", phase="deploy", host=ctx.host.name, choices=list(CHOICES), estimate=figures,
                    deploy=deploy, **parts)  # fmt: skip


def change_of(view: GateView) -> DeployChange:
    """The deploy gate's change (a view of another gate has none: a programming error)."""
    if view.deploy is None:
        raise ValueError(f"the {view.phase} gate's view has no deploy change")
    return view.deploy


def gate_deploy(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask before production changes. A "skip" policy has no deploy phase; "auto" approves by the thresholds."""
    ctx = runtime.context
    run = run_facts(state)
    if run_policy(ctx).deploy == "skip":
        reason = 'the policy\'s deploy = "skip"; `eyas deploy RUN` puts the drafter into production by hand'
        return ended_with(outcome("skipped", reason, run.artifact("drafter"), []))
    # Plain JSON: what the transcript records, the interrupt carries and the checkpoint keeps.
    shown = ctx.boundary.node("gate_deploy", lambda s, r: deploy_view(r.context, s).model_dump(mode="json"), state,
                              runtime)  # fmt: skip
    view = GateView.model_validate(shown)
    change = change_of(view)
    if change.nothing_pays:  # nothing to ask: production stays as it is
        reason = f"{change.nothing_pays}; production untouched"
        ctx.on_note(f"deploy: not deployed: {reason}")
        return ended_with(outcome("skipped", reason, change.drafter, []))
    if view.policy is not None and view.policy.approve:
        answer = GateAnswer(action="approve", reason=view.policy.reasons, who="policy")
        return {"decisions": [answer.decision("deploy")]}
    answer = GateAnswer.model_validate(interrupt(shown))
    if answer.action not in CHOICES:
        raise ValueError(f"The deploy gate takes {' or '.join(CHOICES)}, got {answer.action!r}.")
    update: dict[str, Any] = {"decisions": [answer.decision("deploy")]}
    if answer.action == "reject":
        reason = f"rejected at the deploy gate: {answer.reason or 'no reason given'}; production untouched"
        update |= ended_with(outcome("rejected", reason, change.drafter, change.argv_before))
    return update


def after_deploy_gate(state: RunState) -> Literal["deploy", "report"]:
    """On to the deploy once its gate approved, unless the gate already ended the deploy (skipped, rejected)."""
    run = run_facts(state)
    decision = run.decisions[-1] if run.decisions else None
    approved = decision is not None and decision["gate"] == "deploy" and decision["action"] == "approve"
    return "deploy" if approved and run.deploy is None else "report"
