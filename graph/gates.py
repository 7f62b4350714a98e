"""Approval gates. A gate node only asks: LangGraph re-runs an interrupted node from its start on resume,
so anything with an effect (launching, notifying) happens elsewhere."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from eyas.graph.context import RunContext
from eyas.graph.policy import judge
from eyas.graph.state import Decision, RunState
from eyas.tools.jobs.detached import JobSpec

SpecBuilder = Callable[[RunContext, RunState], list[JobSpec]]
ANSWERS = ("approve", "reject", "edit")


def gate_view(phase: str, state: RunState, ctx: RunContext, specs: list[JobSpec]) -> dict[str, Any]:
    """What the operator sees before a phase: estimates, verification, and the exact commands on which host,
    with the policy's verdict when the run has one."""
    plan = state.get("plan", {})
    estimate = {
        **plan.get("phases", {}).get(phase, {}),
        "total_hours": plan.get("total_hours"),
        "needed_disk_bytes": plan.get("needed_bytes"),
        "fits": plan.get("fits"),
        "verdict": plan.get("verdict"),
    }
    view: dict[str, Any] = {
        "kind": "gate",
        "phase": phase,
        "host": ctx.host.name,
        "estimate": estimate,
        "sizes": dict(state.get("sizes", {})),
        "verification": state.get("verification", {}),
        "commands": [shlex.join(spec.argv) for spec in specs],
    }
    if ctx.policy is not None:
        verdict = judge(ctx.policy, phase, estimate, view["verification"])
        view["policy"] = {"approve": verdict.approve, "reasons": verdict.summary}
    return view


def make_gate(phase: str, build: SpecBuilder) -> Callable[[RunState, Runtime[RunContext]], dict[str, Any]]:
    def view_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return gate_view(phase, state, runtime.context, build(runtime.context, state))

    def gate(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        view = runtime.context.boundary.node(f"gate_{phase}", view_node, state, runtime)
        policy = view.get("policy")
        if policy and policy["approve"]:
            return {"decisions": [Decision(gate=phase, action="approve", reason=policy["reasons"], who="policy")]}
        return apply_answer(phase, interrupt(view))

    gate.__name__ = f"gate_{phase}"
    return gate


def apply_answer(phase: str, answer: dict[str, Any]) -> dict[str, Any]:
    action = answer.get("action")
    if action not in ANSWERS:
        raise ValueError(f"A gate answer must be one of {', '.join(ANSWERS)}, got {action!r}.")
    reason = answer.get("reason", "")
    update: dict[str, Any] = {
        "decisions": [Decision(gate=phase, action=action, reason=reason, who=answer.get("who", "operator"))]
    }
    if action == "edit":
        update["sizes"] = answer["sizes"]
    if action == "reject":
        update["stopped"] = f"rejected at the {phase} gate: {reason or 'no reason given'}"
    return update


def after_gate(state: RunState) -> Literal["launch", "replan", "stop"]:
    action = state["decisions"][-1]["action"]
    if action == "approve":
        return "launch"
    return "replan" if action == "edit" else "stop"
