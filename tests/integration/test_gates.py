"""Gates in the real graph: a policy that refuses the Kimi-K2 plan, an edit that re-plans, answers checked.

The graph runs in-process with LangGraph's in-memory checkpointer; the host is this machine. The plan node
is not run for the Kimi case: its figures are put into the state as the planner computes them (no 61-layer
model can be served here), and the gate judges them exactly as it would after a real plan.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from eyas.graph.context import RunContext
from eyas.graph.gates.gate import apply_answer
from eyas.graph.life.runner import drive, thread
from eyas.graph.pipeline import build_graph
from eyas.graph.policy import PhaseEstimate, Policy, judge
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.estimate import PlanInputs, estimate
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.plan_text import verdict
from eyas.tools.settings.sizes import Sizes
from eyas.tools.settings.units import parse_size
from eyas.tools.target.embedded import EmbeddedTarget

KIMI = PlanInputs(
    model=ModelDims(hidden_size=7168, num_layers=61, vocab_size=163840),
    samples=25_000,
    max_tokens=4096,
    generation_tok_s=2000.0,
    free_disk_bytes=parse_size("2.9TB"),
)


def kimi_plan() -> dict:
    plan = estimate(KIMI)
    return {
        "fits": plan.fits,
        "verdict": verdict(KIMI, plan),
        "needed_bytes": plan.needed_bytes,
        "phases": {"data": {"phase_hours": plan.generation_hours, "disk_bytes": plan.data_bytes}},
    }


def context(tmp_path: Path, policy: Policy | None) -> RunContext:
    target = EmbeddedTarget(tmp_path / "cache", port=9)
    return RunContext(
        config=target.config(),
        host=LocalHost(),
        http=HttpClient(),
        clock=SYSTEM_CLOCK,
        run=RunDir(tmp_path / "runs" / "run-test"),
        policy=policy,
    )


def test_kimi_plan_does_not_fit_and_the_policy_stops_at_the_gate(tmp_path: Path) -> None:
    plan = kimi_plan()
    assert not plan["fits"] and 5.8e12 < plan["needed_bytes"] < 6.0e12
    graph = build_graph(InMemorySaver())
    ctx = context(tmp_path, Policy(max_phase_hours=1000, max_disk_bytes=parse_size("10TB")))
    config = thread(ctx.run)
    verification = {"health": {"status": "ok", "message": "generating"}}
    graph.update_state(config, {"run_id": "run-test", "sizes": {"samples": 25_000}, "plan": plan,
                                "verification": verification, "decisions": []}, as_node="plan")  # fmt: skip
    outcome = drive(graph, ctx, None, ask=None, on_update=lambda update: None)
    assert not outcome.finished and outcome.gate is not None
    assert outcome.gate["phase"] == "data"
    assert not outcome.gate["policy"]["approve"]
    assert "the plan does not fit: Does not fit" in outcome.gate["policy"]["reasons"]
    assert "Ways out:" in outcome.gate["policy"]["reasons"]
    assert "generate.py" in " ".join(outcome.gate["commands"])  # the exact command that would have run
    assert "jobs" not in outcome.state  # nothing launched


def test_policy_budgets_are_checked_one_by_one() -> None:
    estimate_ = PhaseEstimate(fits=True, phase_hours=3.0, total_hours=9.0, disk_bytes=2_000_000_000)
    ok = {"gpus": {"status": "warn", "message": "no GPU"}}
    assert judge(Policy(max_phase_hours=4, max_total_hours=10), "data", estimate_, ok).approve
    over = judge(Policy(max_phase_hours=2, max_disk_bytes=1_000_000_000), "data", estimate_, ok)
    assert not over.approve
    assert over.reasons == [
        "phase estimate 3.00 h over the budget of 2 h",
        "2.00 GB to write, over the budget of 1.00 GB",
    ]
    strict = judge(Policy(allow_warnings=False), "data", estimate_, ok)
    assert not strict.approve and "policy allows no warnings" in strict.summary
    failed = judge(Policy(), "data", estimate_, {"health": {"status": "fail", "message": "down"}})
    assert not failed.approve and failed.summary == "verification failed: health"


@pytest.mark.slow
def test_edit_at_a_gate_replans_with_the_new_sizes(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    """Verify and plan run for real against the served SmolLM2; the operator edits, then rejects."""
    graph = build_graph(InMemorySaver())
    ctx = context(tmp_path, None)
    ctx.config = embedded_target.config()
    answers = iter(
        [
            GateAnswer(action="edit", sizes={"samples": 7, "max_seq_len": 256}, reason="smaller"),
            GateAnswer(action="reject", reason="enough"),
        ]
    )
    seen: list[dict] = []

    def ask(view: dict, elsewhere: object) -> GateAnswer:
        seen.append(view)
        return next(answers)

    # TINY's shapes (tests/support/pipeline_runs.py): the speed probe measures one shape per session, not the defaults',
    # and the throughput probe runs at TINY's concurrency (at the default 256 each plan's probe takes about a minute).
    shapes = {"max_tokens": 48, "max_seq_len": 256, "draft_vocab_size": 2048, "ttt_steps": 1, "concurrency": 4}
    first = {"run_id": "run-test", "sizes": {"samples": 50, **shapes}, "decisions": []}
    outcome = drive(graph, ctx, first, ask=ask, on_update=lambda update: None)
    assert outcome.finished
    assert [d["action"] for d in outcome.state["decisions"]] == ["edit", "reject"]
    assert seen[0]["sizes"]["samples"] == 50 and seen[1]["sizes"]["samples"] == 7
    assert "7 samples" in outcome.state["plan"]["verdict"]
    assert outcome.state["stopped"] == "rejected at the data gate: enough"


def test_an_unknown_answer_is_refused() -> None:
    with pytest.raises(ValidationError, match="action"):
        apply_answer("data", Sizes(), {"action": "maybe"})
    with pytest.raises(ValueError, match="must be one of approve, reject, edit, got 'retry'"):
        apply_answer("data", Sizes(), {"action": "retry"})


def test_an_answer_with_a_size_out_of_bounds_is_refused_wherever_it_is_made() -> None:
    """GateAnswer checks its sizes when it is made (terminal, `eyas approve`, chat, dashboard, a recording), so an
    out-of-range size never becomes a gate's one answer; within bounds, only the sizes named are kept."""
    with pytest.raises(ValidationError, match=r"sizes\.samples\n.*less than or equal to 100000000"):
        GateAnswer(action="edit", sizes={"samples": 10**24})
    with pytest.raises(ValidationError, match="colour"):
        GateAnswer(action="edit", sizes={"colour": 3})
    assert GateAnswer(action="edit", sizes={"ttt_steps": 64}).sizes == {"ttt_steps": 64}


def test_an_edit_that_leaves_no_room_for_a_prompt_is_refused_with_the_fix() -> None:
    """max_seq_len must leave a prompt room beside max_tokens: an edit naming both is refused where it is made; one
    naming either is checked against the run's other where the run is known (the gate, as record_gate_answer)."""
    says = (
        r"max_seq_len 4096 leaves no room for a prompt beside max_tokens 4096 .*: raise max_seq_len \(--max-seq-len\) "
        r"to at least 4160, or lower max_tokens \(--max-tokens\) to at most 4032"
    )
    with pytest.raises(ValidationError, match=says):
        GateAnswer(action="edit", sizes={"max_tokens": 4096, "max_seq_len": 4096})
    assert GateAnswer(action="edit", sizes={"max_tokens": 4096, "max_seq_len": 8192}).sizes is not None
    # One of the two: fine against the defaults' other, and refused against this run's.
    run = Sizes(max_tokens=2048, max_seq_len=4096)
    edit = GateAnswer(action="edit", sizes={"max_tokens": 4096})
    with pytest.raises(ValidationError, match=says):
        apply_answer("data", run, edit.model_dump())
    shorter = apply_answer(
        "data", Sizes(max_tokens=48, max_seq_len=256), {"action": "edit", "sizes": {"max_seq_len": 112}}
    )
    assert shorter["sizes"]["max_seq_len"] == 112  # 48 + 64: just room for a prompt
    with pytest.raises(ValidationError, match="max_seq_len 111 leaves no room"):
        apply_answer("data", Sizes(max_tokens=48, max_seq_len=256), {"action": "edit", "sizes": {"max_seq_len": 111}})


def test_an_edit_changes_the_sizes_it_names_and_is_validated_with_the_rest() -> None:
    before = Sizes(samples=50, max_tokens=48, max_seq_len=256)
    update = apply_answer("data", before, {"action": "edit", "sizes": {"samples": 7}, "reason": "smaller"})
    assert update["sizes"] == {**before.model_dump(), "samples": 7}
    assert update["decisions"] == [{"gate": "data", "action": "edit", "reason": "smaller", "who": "operator"}]
    with pytest.raises(ValidationError, match="samples"):
        apply_answer("data", before, {"action": "edit", "sizes": {"samples": 0}})
    with pytest.raises(ValidationError, match="colour"):
        apply_answer("data", before, {"action": "edit", "sizes": {"colour": 3}})
