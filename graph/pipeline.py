"""The whole run on one screen: research, verify, plan, then each phase behind its gate, supervised.

    research -> verify -> plan -> gate_data -> launch_data -> monitor_data
      -> gate_extract -> launch_extract -> monitor_extract
      -> gate_train -> launch_vocab -> monitor_vocab -> launch_train -> monitor_train
      -> launch_evaluate -> monitor_evaluate -> report

A failed or lost job stops at the failure gate (retry relaunches the phase, whose workloads resume;
abort ends the run with its report). A rejected gate ends the run; an edited gate re-plans. A run that
starts from existing generated data skips straight to the extraction gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.gates import SpecBuilder, after_gate, make_gate
from eyas.graph.phases import data, evaluate, extract, plan, report, research, train, verify
from eyas.graph.state import RunState
from eyas.graph.supervise import after_monitor, failure_gate, make_launch, make_monitor

Node = Callable[[RunState, Runtime[RunContext]], dict[str, Any]]

# The supervised phases in order: (phase, its jobs, the gate that asks before it, the artifact it makes).
PHASES: list[tuple[str, SpecBuilder, str | None, str]] = [
    ("data", data.build_jobs, "data", "conversations"),
    ("extract", extract.build_jobs, "extract", "hidden_states"),
    ("vocab", train.build_vocab_jobs, "train", "vocab"),
    ("train", train.build_train_jobs, None, "drafter"),
    ("evaluate", evaluate.build_jobs, None, "evaluation"),
]
SETUP = {"data": data.setup}


def recorded(name: str, fn: Node) -> Node:
    """Run a node through the run's boundary, so the transcript holds its start and its output."""

    def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return runtime.context.boundary.node(name, fn, state, runtime)

    node.__name__ = name
    return node


def entry(phase: str, gate: str | None) -> str:
    return f"gate_{gate}" if gate else f"launch_{phase}"


def first_phase(state: RunState) -> str:
    """Where the run starts after planning: existing generated data skips the data phase."""
    return entry("extract", "extract") if "conversations" in state.get("artifacts", {}) else entry("data", "data")


def retry_target(state: RunState) -> str:
    if state["decisions"][-1]["action"] != "retry":
        return "report"
    return f"launch_{state['failure']['phase']}"  # type: ignore[index]


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    graph = StateGraph(RunState, context_schema=RunContext)
    for name, fn in (
        ("research", research.research_node),
        ("verify", verify.verify_node),
        ("plan", plan.plan_node),
        ("report", report.report_node),
    ):
        graph.add_node(name, recorded(name, fn))
    graph.add_node("failure_gate", failure_gate)
    graph.add_edge(START, "research")
    graph.add_edge("research", "verify")
    graph.add_edge("verify", "plan")
    graph.add_conditional_edges("plan", first_phase, [entry("data", "data"), entry("extract", "extract")])

    for index, (phase, build, gate, artifact) in enumerate(PHASES):
        launch, monitor = f"launch_{phase}", f"monitor_{phase}"
        graph.add_node(launch, recorded(launch, make_launch(phase, build, artifact, SETUP.get(phase))))
        graph.add_node(monitor, recorded(monitor, make_monitor(phase)))
        if gate:
            graph.add_node(f"gate_{gate}", make_gate(gate, build))
            graph.add_conditional_edges(
                f"gate_{gate}", after_gate, {"launch": launch, "replan": "plan", "stop": "report"}
            )
        graph.add_edge(launch, monitor)
        following = entry(PHASES[index + 1][0], PHASES[index + 1][2]) if index + 1 < len(PHASES) else "report"
        graph.add_conditional_edges(monitor, after_monitor, {"done": following, "failed": "failure_gate"})

    graph.add_conditional_edges("failure_gate", retry_target, ["report", *(f"launch_{p[0]}" for p in PHASES)])
    graph.add_edge("report", END)
    return graph.compile(checkpointer=checkpointer, name="eyas")
