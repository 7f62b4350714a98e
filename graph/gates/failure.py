"""The failure gate: a job of a phase failed or was lost; the gate shows its status, the log's tail and a first
diagnosis (graph/supervise.py's), and asks retry (the workloads resume where they stopped) or abort."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import Field

from eyas.graph.context import RunContext
from eyas.graph.run_facts import run_facts
from eyas.graph.state import FAILURE_ACTIONS, Action, Failure, GateAnswer, Record, RunState


class FailureView(Record):
    """What the failure gate shows: the failed job of the phase, its status, the log's tail and a diagnosis."""

    kind: Literal["failure"]
    phase: str
    job_id: str
    status: str
    log_tail: str
    diagnosis: str
    choices: list[Action] = Field(default_factory=list)

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(self.choices) or FAILURE_ACTIONS


def failure_view(failure: Failure) -> FailureView:
    return FailureView(kind="failure", **failure, choices=list(FAILURE_ACTIONS))


def failure_gate(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Stop at the failure and ask: retry or abort. Reached only from a monitor that recorded a failure."""
    failure = run_facts(state).failure
    if failure is None:
        raise ValueError("The failure gate was reached with no failure on record.")
    answer = GateAnswer.model_validate(interrupt(failure_view(failure).model_dump(mode="json")))
    if answer.action not in FAILURE_ACTIONS:
        raise ValueError(f"A failure gate takes {' or '.join(FAILURE_ACTIONS)}, got {answer.action!r}.")
    update: dict[str, Any] = {"decisions": [answer.decision(f"failure:{failure['phase']}")]}
    if answer.action == "abort":
        update["stopped"] = f"aborted after {failure['job_id']} {failure['status']}"
    return update
