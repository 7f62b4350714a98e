"""The run's state read typed (graph/run_facts.py), and the deploy and failure gates' typed views: what a recorded run
holds must read back and dump to the very JSON it was recorded with, or the examples stop replaying."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from eyas.graph.gates.deploy import change_of
from eyas.graph.gates.failure import failure_view
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.phases.deploy.node import ended_with, outcome
from eyas.graph.run_facts import run_facts
from eyas.graph.state import Failure, run_plan, run_sizes
from recorded_examples import EXAMPLES


def recorded_deploy_views() -> list[dict[str, object]]:
    lines = (EXAMPLES / "full-pipeline" / "transcript.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if '"node":"gate_deploy","phase":"end"' in line]
    return [event["output"] for event in events]


def test_a_recorded_deploy_gate_reads_back_typed_and_dumps_as_recorded() -> None:
    views = recorded_deploy_views()
    assert views
    for recorded in views:
        view = read_view(recorded)
        assert isinstance(view, GateView) and view.actions == ("approve", "reject")
        change = change_of(view)
        assert change.method == "ngram" and change.k == 3 and change.thresholds.probe_requests == 8
        assert change.argv_after[-2] == "--speculative-config" and change.error is None
        assert view.model_dump(mode="json") == recorded


def test_the_deploy_outcome_is_kept_as_json_and_read_back_typed() -> None:
    update = ended_with(outcome("rejected", "not tonight", "/d", ["vllm", "serve", "m"]))
    assert json.loads(json.dumps(update)) == update  # plain JSON, as the checkpoint keeps it
    read = run_facts(update).deploy
    assert read is not None and read.status == "rejected" and not read.restarted
    assert read.argv_after == ["vllm", "serve", "m"] and read.tokens_per_s_after is None


def test_the_failure_gate_shows_the_failure_as_the_interrupt_always_carried_it() -> None:
    failure = Failure(phase="train", job_id="r.train", status="failed (exit 1)", log_tail="boom", diagnosis="OOM.")
    shown = failure_view(failure).model_dump(mode="json")
    assert shown == {"kind": "failure", **failure, "choices": ["retry", "abort"]}
    assert read_view(shown).actions == ("retry", "abort")


def test_a_partial_state_reads_with_what_it_lacks_empty() -> None:
    run = run_facts({"failure": {"phase": "train", "job_id": "j", "status": "lost"}, "plan": None, "deploy": None})
    assert run.failure is not None and run.failure["diagnosis"] == "" and run.ended_early
    assert run.deploy is None and not run.plan.model_fields_set and run.jobs == {} and not run.ran("train")
    production = run_facts({"production": {"stops": [{"load_s": 95.0}, {"load_s": None}]}}).production
    assert production is not None and production.last_load_s() == 95.0


def test_a_bad_size_fails_where_the_sizes_are_used_not_where_the_state_is_read() -> None:
    run = run_facts({"sizes": {"samples": -1}, "jobs": {"data": ["r.generate"]}})
    assert run.ran("data") and run.recorded_sizes == {"samples": -1}
    with pytest.raises(ValidationError, match="samples"):
        _ = run.sizes


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"plan": None, "sizes": None},
        {"plan": {}},
        {"plan": {"fits": True, "verdict": "Fits"}, "sizes": {"samples": 7}},
    ],
)
def test_the_typed_state_and_the_one_key_readers_read_sizes_and_plan_alike(state: dict[str, object]) -> None:
    """`RunFacts.sizes`/`.plan` and `run_sizes`/`run_plan` (a node that needs only one key) read with the same
    parsers (`recorded_sizes`, `RunPlan`): a null, an empty or an absent key reads the same through both."""
    facts = run_facts(state)
    assert facts.sizes == run_sizes(state) and facts.plan == run_plan(state)
    assert facts.plan.model_fields_set == run_plan(state).model_fields_set
