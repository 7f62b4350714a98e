"""One production downtime window on the rehearsal host (tests/unit/test_rehearsal_plan.py: Kimi-K2.5 over
tensor-parallel 8, production holding 93% of every GPU, a 22-minute load): extraction, training and the evaluation
each need production stopped, so they run as one window, stopped once and started once. The plan counts the load
once; the extraction gate shows the whole window and its approval (a person's or a policy's, within its downtime
budget) answers the training gate, which records that it passed with it; without that approval production comes
back before the training gate waits. The plan, the gates, the pipeline's decisions and the dry run are the real
ones; nothing is launched (the stop and start themselves: tests/integration/test_production_stop.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.runtime import Runtime
from test_rehearsal_plan import rehearsal_host

from eyas.agents.faces.gate_text import gate_sections
from eyas.graph.downtime import production_action
from eyas.graph.dry_run import dry_run_lines, walk_phases
from eyas.graph.gates.gate import apply_answer, make_gate
from eyas.graph.gates.view import gate_view
from eyas.graph.life.transcript_state import fold_state
from eyas.graph.phases.extract import node as extract
from eyas.graph.phases.train import node as train
from eyas.graph.pipeline import PHASES
from eyas.graph.policy import Policy
from eyas.graph.state import GateAnswer, RunState, run_plan, run_sizes
from eyas.graph.window import PHASE_ORDER, stays_down
from eyas.tools.recording.transcript import NodeEvent
from eyas.tools.settings.units import parse_size

LOAD_H = 1320 / 3600  # the rehearsal config's target.load_time_s


def test_the_windows_phases_and_gates_are_the_pipelines() -> None:
    """graph/window.py names the pipeline's phases in its order, and the pipeline asks each gate before the first of
    the phases that gate approves (the training gate before vocab)."""
    assert tuple(phase.name for phase in PHASES) == PHASE_ORDER
    assert [(phase.name, phase.gate) for phase in PHASES if phase.gate] == [
        ("data", "gate_data"), ("extract", "gate_extract"), ("vocab", "gate_train")
    ]  # fmt: skip


def test_the_plan_and_the_dry_run_count_one_window_with_one_load(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    plan = run_plan(state)
    hours = {phase: plan.phase(phase).phase_hours for phase in ("extract", "train", "evaluate")}
    assert None not in hours.values()
    (window,) = plan.downtime_windows()
    assert window.phases == ["extract", "train", "evaluate"] and window.load_s == 1320
    total = sum(h for h in hours.values() if h is not None) + LOAD_H
    assert window.downtime_hours == pytest.approx(total)
    # Each phase's own downtime adds up to the window's: the load only on the evaluation, after which it starts.
    impacts = {phase: plan.production(phase) for phase in hours}
    downs = {phase: impact.downtime_hours for phase, impact in impacts.items() if impact is not None}
    assert downs == pytest.approx({"extract": hours["extract"], "train": hours["train"],
                                   "evaluate": (hours["evaluate"] or 0) + LOAD_H})  # fmt: skip
    extract_impact = impacts["extract"]
    assert extract_impact is not None and "stays stopped for train" in extract_impact.reason

    walk = walk_phases(ctx, state)
    assert walk["plan"]["downtime_windows"] == [window.model_dump(mode="json")]
    phases = {phase["phase"]: phase["production"] for phase in walk["phases"]}
    assert phases["vocab"]["action"] == "stopped"  # on the CPU, inside the window: production stays down
    stop, start = phases["extract"]["commands"][0], phases["evaluate"]["commands"][-1]
    assert stop.startswith("stand-in for systemd") and "stop the job" in stop and "ExecStart with" in start
    assert phases["train"]["commands"] == ["(the train phase's jobs)"]  # no restart and no stop between
    lines = dry_run_lines(walk)
    assert (
        f"downtime window: production down {total:.2f} h for extract, train, evaluate, production's 22 min load "
        "counted once: stopped once before extract, started once after evaluate"
    ) in lines


def test_the_extraction_gate_approves_the_window_and_the_training_gate_passes_with_it(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    (window,) = run_plan(state).downtime_windows()
    assert window.downtime_hours is not None
    view = gate_view("extract", state, ctx, extract.build_jobs(ctx, state))
    assert view.window == window and set(view.production) == {"extract", "train", "evaluate"}
    assert view.estimate.downtime_hours == pytest.approx(window.downtime_hours)  # type: ignore[union-attr]
    rows = {line.label: line.text for section in gate_sections(view) for line in section.lines}
    assert rows["downtime window"].startswith(f"production down {window.downtime_hours:.2f} h for extract, train")

    # A policy approves the window when the window's downtime fits its budget: extraction's alone does not count.
    extract_down = run_plan(state).production("extract").downtime_hours  # type: ignore[union-attr]
    budgets = {"max_production_downtime_hours": window.downtime_hours - 0.01, "allow_production_stop": True}
    ctx.policy = Policy(**budgets, allow_warnings=True)
    refused = gate_view("extract", state, ctx, []).policy
    assert refused is not None and not refused.approve and extract_down < window.downtime_hours - 0.01
    assert f"production downtime {window.downtime_hours:.2f} h is over the budget" in refused.reasons
    ctx.policy = Policy(**{**budgets, "max_production_downtime_hours": window.downtime_hours}, allow_warnings=True)
    approved = gate_view("extract", state, ctx, []).policy
    assert approved is not None and approved.approve, approved
    # Its approval answers the training gate too, so the policy weighs that gate's own budgets there and then.
    train_hours = run_plan(state).phase("train").phase_hours
    assert train_hours is not None and train_hours > 1
    ctx.policy = Policy(**{**budgets, "max_production_downtime_hours": 10_000}, max_phase_hours=1)
    short = gate_view("extract", state, ctx, []).policy
    assert short is not None and not short.approve
    assert f"the train gate (in the window): phase estimate {train_hours:.2f} h over the budget of 1 h" in short.reasons
    ctx.policy = None

    # Before the window is approved, production comes back after extraction: the training gate would wait.
    assert stays_down(state, "extract") is None
    answer = GateAnswer(action="approve", reason="one window tonight")
    decided: RunState = {**state, **apply_answer("extract", run_sizes(state), answer, window=view.window_phases())}
    assert decided["decisions"][-1]["window"] == ["extract", "vocab", "train", "evaluate"]
    assert [stays_down(decided, phase) for phase in PHASE_ORDER] == [None, "vocab", "train", "evaluate", None]

    # The training gate passes without asking (an interrupt outside a graph would raise), naming the approval.
    gate = make_gate("train", train.build_vocab_jobs)(decided, Runtime(context=ctx))
    (decision,) = gate["decisions"]
    assert decision["action"] == "approve" and decision["who"] == "operator" and "stopped" not in gate
    assert decision["reason"] == (
        "approved with the downtime window (extract, vocab, train, evaluate) at the extract gate by operator: one "
        "window tonight"
    )
    later = gate_view("train", decided, ctx, [])
    assert later.window_approval is not None and later.window_approval.reason == decision["reason"]
    # The report, folded from the transcript (the gate's recorded view), shows the same decision.
    shown = NodeEvent(seq=1, task="t", t=1.0, node="gate_train", phase="end", output=later.model_dump(mode="json"))
    assert fold_state([shown])["decisions"] == [decision]

    # A rejection (or an edit) at the extraction gate approves no window: nothing stays down.
    rejected = apply_answer("extract", run_sizes(state), GateAnswer(action="reject"), window=view.window_phases())
    assert "window" not in rejected["decisions"][0]
    assert stays_down({**state, **rejected}, "extract") is None


def test_vocab_outside_a_window_keeps_production_in_the_dry_run_as_in_the_pipeline(tmp_path: Path) -> None:
    """When training and the evaluation keep production (as on a host with GPUs to spare for them), the window holds
    extraction alone: production starts again after it, vocab.py runs with production up, and the dry run says so."""
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    for phase in ("train", "evaluate"):
        impact = state["plan"]["phases"][phase]["production"]
        impact.update(action="keep", downtime_hours=0.0, reason="the GPUs production leaves free suffice")
    (window,) = run_plan(state).downtime_windows()
    assert window.phases == ["extract"]
    approved = apply_answer("extract", run_sizes(state), GateAnswer(action="approve"), window=["extract"])
    decided: RunState = {**state, **approved}
    assert stays_down(decided, "extract") is None and production_action(decided, "vocab") == "keep"  # the pipeline
    phases = {phase["phase"]: phase["production"] for phase in walk_phases(ctx, decided)["phases"]}
    assert phases["extract"]["action"] == "stop" and phases["vocab"]["action"] == "keep"
    lines = dry_run_lines(walk_phases(ctx, decided))
    assert "== vocab: production keep; no GPU" in lines
    assert "   the plan gives vocab no GPU, so production stays up meanwhile" in lines
