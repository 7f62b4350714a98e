"""Approval gates. A gate node only asks: LangGraph re-runs an interrupted node from its start on resume,
so anything with an effect (launching, notifying) happens elsewhere."""

from __future__ import annotations

import shlex
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from eyas.graph.context import Node, RunContext
from eyas.graph.gates.paths import blocked_stop, paths_view
from eyas.graph.gates.production import production_estimate, production_view
from eyas.graph.policy import PhaseEstimate, judge
from eyas.graph.state import APPROVAL_ACTIONS, Decision, GateAnswer, RunState, run_sizes
from eyas.graph.supervise import SpecBuilder
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.executor import job_resources
from eyas.tools.settings.config import ClusterConfig
from eyas.tools.settings.sizes import Sizes


def cluster_view(cluster: ClusterConfig, specs: list[JobSpec]) -> dict[str, Any]:
    """Where the phase's jobs go on a Ray cluster and what each asks of it (an unset resource asks nothing)."""
    return {
        "executor": "ray",
        "ray_address": cluster.ray_address,
        "resources": {spec.job_id: job_resources(cluster, spec.job_id).model_dump(exclude_none=True) for spec in specs},
    }


def cluster_lines(cluster: dict[str, Any] | None) -> list[str]:
    """The cluster part of a gate view as lines for a terminal: each job and what it asks of Ray."""
    if not cluster:
        return []
    lines = [f"jobs go to the Ray cluster at {cluster['ray_address']}"]
    for job_id, asks in cluster["resources"].items():
        wanted = ", ".join(f"{name}={value}" for name, value in asks.items() if value not in ({}, None))
        lines.append(f"{job_id}: {wanted or 'asks nothing (runs on the head node)'}")
    return lines


def gate_view(phase: str, state: RunState, ctx: RunContext, specs: list[JobSpec]) -> dict[str, Any]:
    """What the operator sees before a phase: estimates, verification, and the exact commands on which host,
    with the policy's verdict when the run has one."""
    plan = state.get("plan", {})
    production = production_view(phase, state, ctx)
    estimate = PhaseEstimate(
        **plan.get("phases", {}).get(phase, {}),
        total_hours=plan.get("total_hours"),
        needed_disk_bytes=plan.get("needed_bytes"),
        fits=plan.get("fits"),
        verdict=plan.get("verdict"),
        **production_estimate(production),
    )
    view: dict[str, Any] = {
        "kind": "gate",
        "phase": phase,
        "host": ctx.host.name,
        "estimate": estimate.model_dump(),
        "sizes": run_sizes(state).model_dump(),
        "verification": state.get("verification", {}),
        "commands": [shlex.join(spec.argv) for spec in specs],
    }
    if production:
        view["production"] = production
    if ctx.config.cluster.executor == "ray":
        view["cluster"] = cluster_view(ctx.config.cluster, specs)
    view.update(paths_view(phase, state))
    if ctx.policy is not None:
        verdict = judge(ctx.policy, phase, estimate, view["verification"])
        blocked = [f"cannot run here: {reason}" for reason in view.get("blocked", [])]
        view["policy"] = {
            "approve": verdict.approve and not blocked,
            "reasons": "; ".join([*blocked, verdict.summary]),
        }
    return view


def make_gate(phase: str, build: SpecBuilder) -> Node:
    def view_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return gate_view(phase, state, runtime.context, build(runtime.context, state))

    def gate(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        view = runtime.context.boundary.node(f"gate_{phase}", view_node, state, runtime)
        policy = view.get("policy")
        if policy and policy["approve"]:
            return {"decisions": [Decision(gate=phase, action="approve", reason=policy["reasons"], who="policy")]}
        return apply_answer(phase, run_sizes(state), interrupt(view), blocked=view.get("blocked", []))

    gate.__name__ = f"gate_{phase}"
    return gate


def apply_answer(phase: str, sizes: Sizes, resumed: object, *, blocked: list[str] | None = None) -> dict[str, Any]:
    """The state update for the answer the gate was resumed with. An edit changes the sizes it names and is
    validated with the rest, so a run never continues with sizes that `eyas run` would have refused. An approval
    of a phase whose path cannot work here (`blocked`) ends the run instead: it is never launched."""
    answer = GateAnswer.model_validate(resumed)
    if answer.action not in APPROVAL_ACTIONS:
        raise ValueError(f"A gate answer must be one of {', '.join(APPROVAL_ACTIONS)}, got {answer.action!r}.")
    update: dict[str, Any] = {"decisions": [answer.decision(phase)]}
    if answer.action == "edit":
        update["sizes"] = Sizes.model_validate({**sizes.model_dump(), **(answer.sizes or {})}).model_dump()
    if answer.action == "reject":
        update["stopped"] = f"rejected at the {phase} gate: {answer.reason or 'no reason given'}"
    if answer.action == "approve" and blocked:
        update["stopped"] = blocked_stop(phase, blocked)
    return update


def after_gate(state: RunState) -> Literal["launch", "replan", "stop"]:
    action = state["decisions"][-1]["action"]
    if action == "approve":
        return "stop" if state.get("stopped") else "launch"
    return "replan" if action == "edit" else "stop"
