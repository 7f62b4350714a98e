"""One production downtime window in a run: the plan's back-to-back GPU phases that stop production
(tools/planning/downtime_window.py) run behind gates answered before the stop, with one stop and one restart.

The window spans every pipeline phase from its first to its last (vocab, on the CPU, between extraction and
training, included). Its first gate (the one asked before its first phase) shows the whole window, and approving it
approves the window: the decision keeps the window's phases (`Decision["window"]`). A later gate inside the window
then passes with a decision that names that approval (graph/gates/gate.py), and a phase that ends well leaves
production stopped when the next phase is inside the same approved window (graph/downtime.py). Where a later gate
would wait for a person (no approval covers it), the phase before it restores production, as does every failure,
so production never sits stopped while a person is waited for.
"""

from __future__ import annotations

from eyas.graph.run_facts import run_facts
from eyas.graph.state import Decision, RunPlan, RunState, run_plan
from eyas.tools.planning.downtime_window import DowntimeWindow

# The supervised phases each gate asks about, in the pipeline's order: the training gate approves vocab, training and
# the evaluation after it. graph/pipeline.py places its gate nodes from this; test_downtime_window holds the order.
GATE_PHASES = {"data": ("data",), "extract": ("extract",), "train": ("vocab", "train", "evaluate")}
PHASE_ORDER = tuple(phase for phases in GATE_PHASES.values() for phase in phases)
GATE_OF = {phase: gate for gate, phases in GATE_PHASES.items() for phase in phases}


def span(window: DowntimeWindow) -> list[str]:
    """Every pipeline phase the window holds production down for, from its first phase to its last."""
    return list(PHASE_ORDER[PHASE_ORDER.index(window.first) : PHASE_ORDER.index(window.last) + 1])


def window_of(plan: RunPlan, phase: str) -> DowntimeWindow | None:
    """The window `phase` runs in, if any."""
    return next((window for window in plan.downtime_windows() if phase in span(window)), None)


def opened_at(plan: RunPlan, gate: str) -> DowntimeWindow | None:
    """The window whose first gate is `gate`: the gate that shows it whole and whose approval approves it."""
    return next((window for window in plan.downtime_windows() if GATE_OF.get(window.first) == gate), None)


def window_approval(state: RunState, gate: str) -> Decision | None:
    """The approval, at an earlier gate, of the window that holds this gate's phases: the latest decision at the
    window's first gate, when it approved a window with them. None when this gate must ask for itself."""
    plan = run_plan(state)
    phases = GATE_PHASES.get(gate, ())
    window = next((found for phase in phases if (found := window_of(plan, phase)) is not None), None)
    if window is None or GATE_OF[window.first] == gate:
        return None
    inside = {phase for phase in phases if phase in span(window)}
    asked = [decision for decision in run_facts(state).decisions if decision["gate"] == GATE_OF[window.first]]
    if not asked or asked[-1]["action"] != "approve" or not inside <= set(asked[-1].get("window", [])):
        return None
    return asked[-1]


def approved_with_window(approval: Decision) -> str:
    """The reason a later gate records when the window's approval covers it."""
    phases = ", ".join(approval.get("window", []))
    said = f": {approval['reason']}" if approval["reason"] else ""
    return f"approved with the downtime window ({phases}) at the {approval['gate']} gate by {approval['who']}{said}"


def stays_down(state: RunState, phase: str) -> str | None:
    """After `phase` ended well: the next phase when production stays stopped for it (inside the same window, and
    its gate, if it has one of its own, answered by the window's approval); None when production starts again."""
    if phase not in PHASE_ORDER or phase == PHASE_ORDER[-1]:
        return None
    following = PHASE_ORDER[PHASE_ORDER.index(phase) + 1]
    window = window_of(run_plan(state), phase)
    if window is None or following not in span(window):
        return None
    same_gate = GATE_OF[following] == GATE_OF[phase]
    return following if same_gate or window_approval(state, GATE_OF[following]) is not None else None
