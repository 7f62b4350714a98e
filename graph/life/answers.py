"""Answering the gate a stored run waits at, from outside its driver (`eyas approve`, the dashboard): the answer is
checked against the gate it is for, then appended to answers.jsonl, where the driver (or `eyas resume`) reads it."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.life.run_view import read_run
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.errors import EyasError
from eyas.tools.settings.config import format_validation_error
from eyas.tools.settings.sizes import Sizes


def pending_view(run: RunDir) -> tuple[str, dict[str, Any]]:
    """The gate the run waits at: its id and what it shows."""
    pending = read_run(run).pending
    if pending is None:
        raise EyasError(f"Run {run.run_id} is not waiting at a gate; `eyas status {run.run_id}` says where it is.")
    return pending


def record_gate_answer(run: RunDir, answer: GateAnswer, gate_id: str | None = None) -> dict[str, Any]:
    """Record `answer` for the gate the run waits at and return that gate's view. With `gate_id` (the gate the
    answerer saw), a gate that has moved on since is refused. An edit's sizes are checked as the gate will check
    them, so a recorded answer never stops the driver."""
    current, view = pending_view(run)
    if gate_id is not None and gate_id != current:
        raise EyasError(f"Run {run.run_id} no longer waits at the gate answered; reload to see where it waits now.")
    shown = read_view(view)
    if answer.action not in shown.actions:  # a gate may name its choices (the deploy gate has nothing to edit)
        kind = "A failure gate" if isinstance(shown, FailureView) else "An approval gate"
        raise EyasError(f"{kind} takes one of: {', '.join(shown.actions)}; not {answer.action}.")
    if isinstance(shown, GateView) and answer.action == "edit":
        try:
            Sizes.model_validate({**shown.sizes, **(answer.sizes or {})})
        except ValidationError as exc:
            raise EyasError("The edited sizes are not valid: " + "; ".join(format_validation_error(exc))) from None
    run.record_answer(current, answer)
    return view
