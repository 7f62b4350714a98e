"""The plan is kept in the run's state as plain JSON and read back typed (`run_plan`): the recorded example's plan
reads back to the very JSON it was recorded as (key order too, so replays match), a run that has not planned reads
as the empty plan, and a plan of the wrong shape is refused where it is read, not three readers later."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from eyas.graph.state import RunPlan, run_plan
from eyas.tools.recording.transcript_reader import read_transcript

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline" / "transcript.jsonl"


def recorded_plans(value: Any) -> list[dict[str, Any]]:
    """Every plan in a recorded event: the plan node's output, the state it went into."""
    if isinstance(value, dict):
        found = [value["plan"]] if isinstance(value.get("plan"), dict) and "verdict" in value["plan"] else []
        return found + [plan for item in value.values() for plan in recorded_plans(item)]
    if isinstance(value, list):
        return [plan for item in value for plan in recorded_plans(item)]
    return []


def test_the_recorded_plan_reads_back_to_the_json_it_was_recorded_as() -> None:
    plans = [plan for event in read_transcript(EXAMPLE).events for plan in recorded_plans(event.model_dump())]
    assert plans, "the example recorded no plan"
    for recorded in plans:
        plan = run_plan({"plan": recorded})
        assert json.dumps(plan.model_dump(mode="json")) == json.dumps(recorded)
        assert plan.phase("extract").disk_bytes == recorded["phases"]["extract"]["disk_bytes"]
        assert plan.production("extract") is not None
        assert plan.production("extract").action == recorded["phases"]["extract"]["production"]["action"]


def test_a_run_that_has_not_planned_reads_as_the_empty_plan() -> None:
    plan = run_plan({})
    assert plan.verdict is None and plan.fits is None and plan.phase("train").phase_hours is None
    assert plan.production("extract") is None and plan.model_dump(mode="json") == {}


@pytest.mark.parametrize(
    "bad",
    [
        {"phases": {"extract": {"phase_hours": "soon"}}},
        {"phases": {"extract": {"production": {"action": "pause"}}}},
        {"extraction": {"backend": "tensorrt", "requested": "auto", "reason": "?"}},
    ],
)
def test_a_plan_of_the_wrong_shape_is_refused_where_it_is_read(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RunPlan.model_validate(bad)
