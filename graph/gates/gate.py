"""Approval gates. A gate node only asks: LangGraph re-runs an interrupted node from its start on resume,
so anything with an effect (launching, notifying) happens elsewhere. A gate inside a downtime window that its first
gate approved passes without asking, its decision naming that approval (graph/window.py)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from eyas.graph.context import Node, RunContext
from eyas.graph.gates.paths import blocked_stop
from eyas.graph.gates.view import GateView, gate_view
from eyas.graph.run_facts import run_facts
from eyas.graph.state import APPROVAL_ACTIONS, Decision, GateAnswer, RunState, run_sizes
from eyas.graph.supervise import SpecBuilder
from eyas.tools.settings.sizes import Sizes


def make_gate(phase: str, build: SpecBuilder) -> Node:
    def view_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        # Plain JSON: what the transcript records, the interrupt carries and the checkpoint keeps.
        return gate_view(phase, state, runtime.context, build(runtime.context, state)).model_dump(mode="json")

    def gate(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        shown = runtime.context.boundary.node(f"gate_{phase}", view_node, state, runtime)
        view = GateView.model_validate(shown)
        approved = view.window_approval
        if approved is not None:
            answer = GateAnswer(action="approve", reason=approved.reason, who=approved.who)
            return apply_answer(phase, run_sizes(state), answer, blocked=view.blocked)
        window = view.window_phases()
        if view.policy is not None and view.policy.approve:
            decision = Decision(gate=phase, action="approve", reason=view.policy.reasons, who="policy")
            return {"decisions": [{**decision, "window": window} if window else decision]}
        return apply_answer(phase, run_sizes(state), interrupt(shown), blocked=view.blocked, window=window)

    gate.__name__ = f"gate_{phase}"
    return gate


def apply_answer(
    phase: str, sizes: Sizes, resumed: object, *, blocked: list[str] | None = None, window: list[str] | None = None
) -> dict[str, Any]:
    """The state update for the answer the gate was resumed with. An edit changes the sizes it names and is
    validated with the rest, so a run never continues with sizes that `eyas run` would have refused. An approval
    of a phase whose path cannot work here (`blocked`) ends the run instead: it is never launched. An approval of a
    gate that opens a downtime window approves the window's phases (`window`) with it."""
    answer = GateAnswer.model_validate(resumed)
    if answer.action not in APPROVAL_ACTIONS:
        raise ValueError(f"A gate answer must be one of {', '.join(APPROVAL_ACTIONS)}, got {answer.action!r}.")
    decision = answer.decision(phase)
    if answer.action == "approve" and window and not blocked:
        decision["window"] = window
    update: dict[str, Any] = {"decisions": [decision]}
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
        return "stop" if run_facts(state).stopped else "launch"
    return "replan" if action == "edit" else "stop"
