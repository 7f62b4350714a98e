"""The whole run on one screen: research, verify, plan, then each phase behind its gate, supervised.

    research -> verify -> plan -> prepare_drafter -> gate_data -> launch_data -> monitor_data
      -> replan (the plan made again from the generated data) -> gate_extract -> launch_extract -> monitor_extract
      -> gate_train -> launch_vocab -> monitor_vocab -> launch_train -> monitor_train
      -> launch_evaluate -> monitor_evaluate -> gate_deploy -> deploy -> report

A failed or lost job stops at the failure gate (retry relaunches the phase, whose workloads resume;
abort ends the run with its report). A rejected gate ends the run; an edited gate re-plans. A run that
starts from existing generated data skips straight to the extraction gate. A phase the plan says cannot share
the host with production stops it at launch and starts it again when its monitor ends (graph/downtime.py), unless
the next phase is in the same downtime window, approved at the window's first gate (graph/window.py).
The drafter to finetune from, if any, is downloaded, checked and converted before the first gate, which shows it
(graph/phases/data/drafter.py). The deploy gate asks before the drafter goes into production; a reject (or a
policy's deploy = "skip") leaves production untouched and goes to the report (graph/phases/deploy/node.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from eyas.graph.context import Node, RunContext, RunGraph
from eyas.graph.downtime import restoring_production, stopping_production
from eyas.graph.gates.deploy import after_deploy_gate, gate_deploy
from eyas.graph.gates.failure import failure_gate
from eyas.graph.gates.gate import after_gate, make_gate
from eyas.graph.phases.data import node as data
from eyas.graph.phases.data.drafter import prepare_drafter
from eyas.graph.phases.deploy import node as deploy
from eyas.graph.phases.evaluate import node as evaluate
from eyas.graph.phases.extract import node as extract
from eyas.graph.phases.plan import node as plan
from eyas.graph.phases.plan.replan import replan_node
from eyas.graph.phases.report import node as report
from eyas.graph.phases.research import node as research
from eyas.graph.phases.train import node as train
from eyas.graph.phases.verify import node as verify
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState
from eyas.graph.supervise import SpecBuilder, after_monitor, make_launch, make_monitor
from eyas.graph.window import GATE_OF, GATE_PHASES
from eyas.tools.errors import EyasError


@dataclass(frozen=True)
class Phase:
    """A supervised phase and its graph nodes, named in full so that `grep launch_train` finds them."""

    name: str
    launch: str
    monitor: str
    build: SpecBuilder
    artifact: str
    together: bool = False  # its jobs are one distributed job: a retry relaunches them all

    @property
    def gate(self) -> str | None:
        """The gate node that asks before this phase: each gate of graph/window.py's GATE_PHASES asks before the
        first of its phases (the training gate before vocab)."""
        topic = GATE_OF[self.name]
        return f"gate_{topic}" if GATE_PHASES[topic][0] == self.name else None

    @property
    def topic(self) -> str:
        """What this phase's gate asks about: the phase, or training as a whole for vocab."""
        return GATE_OF[self.name]

    @property
    def entry(self) -> str:
        return self.gate or self.launch


# The supervised phases in order.
PHASES = [
    Phase("data", "launch_data", "monitor_data", data.build_jobs, "conversations"),
    Phase("extract", "launch_extract", "monitor_extract", extract.build_jobs, "hidden_states"),
    Phase("vocab", "launch_vocab", "monitor_vocab", train.build_vocab_jobs, "vocab"),
    Phase("train", "launch_train", "monitor_train", train.build_train_jobs, "drafter", together=True),
    Phase("evaluate", "launch_evaluate", "monitor_evaluate", evaluate.build_jobs, "evaluation"),
]
BY_NAME = {phase.name: phase for phase in PHASES}
SETUP = {"data": data.setup, "extract": data.join_shards}


def recorded(name: str, fn: Node) -> Node:
    """Run a node through the run's boundary, so the transcript holds its start and its output."""

    def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return runtime.context.boundary.node(name, fn, state, runtime)

    node.__name__ = name
    return node


class NoRunContext(EyasError, RuntimeError):
    """A node started without a live run. A RuntimeError too, so that LangGraph's server shows its message."""


def needs_run_context(name: str, fn: Node) -> Node:
    """Refuse, in words, to run a node without the live context `eyas run` builds (as when Studio runs it)."""

    def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        if not isinstance(runtime.context, RunContext):
            raise NoRunContext(
                f"The node {name} cannot run here: eyas's nodes act on a live run (the host's connection, the "
                "run's transcript, its policy), which only `eyas run` builds. LangGraph Studio shows the graph, "
                "its state and the runs' checkpoints; to run it, use `eyas run [--config FILE]` (or `eyas demo`), "
                "then `eyas status RUN` and `eyas approve RUN` to follow it and answer its gates."
            )
        return fn(state, runtime)

    node.__name__ = name
    return node


def first_phase(state: RunState) -> str:
    """Where the run starts after planning: existing generated data skips the data phase."""
    return BY_NAME["extract"].entry if "conversations" in run_facts(state).artifacts else BY_NAME["data"].entry


def retry_target(state: RunState) -> str:
    if state["decisions"][-1]["action"] != "retry":
        return "report"
    failure = state["failure"]
    assert failure is not None  # a retry is decided at the failure gate, which a failure leads to
    return BY_NAME[failure["phase"]].launch


def build_graph(checkpointer: BaseCheckpointSaver | None = None, *, context_schema: type = RunContext) -> RunGraph:
    """The pipeline. `context_schema` is RunContext for runs; Studio gets one it can build (graph/studio.py)."""
    graph: StateGraph[RunState, RunContext, RunState, RunState] = StateGraph(RunState, context_schema=context_schema)

    def add(name: str, fn: Node) -> None:
        graph.add_node(name, needs_run_context(name, fn))

    for name, fn in (
        ("research", research.research_node),
        ("verify", verify.verify_node),
        ("plan", plan.plan_node),
        ("deploy", deploy.deploy_node),
        ("report", report.report_node),
    ):
        add(name, recorded(name, fn))
    add("failure_gate", failure_gate)
    add("gate_deploy", gate_deploy)
    graph.add_edge(START, "research")
    graph.add_edge("research", "verify")
    graph.add_edge("verify", "plan")
    # Recorded only when it acts (a run without drafter_base passes through unrecorded): prepare_drafter's own.
    add("prepare_drafter", prepare_drafter)
    graph.add_edge("plan", "prepare_drafter")
    graph.add_conditional_edges("prepare_drafter", first_phase, [BY_NAME["data"].entry, BY_NAME["extract"].entry])

    # Once the data exists the plan is made again from it, before the extraction gate weighs it.
    add("replan", recorded("replan", replan_node))
    graph.add_edge("replan", BY_NAME["extract"].entry)
    entries = ["replan", *(later.entry for later in PHASES[2:]), "gate_deploy"]
    for phase, following in zip(PHASES, entries, strict=True):
        launch = stopping_production(
            phase.name, make_launch(phase.name, phase.build, phase.artifact, SETUP.get(phase.name), phase.together)
        )
        add(phase.launch, recorded(phase.launch, launch))
        add(
            phase.monitor,
            recorded(phase.monitor, restoring_production(phase.monitor, make_monitor(phase.name), phase=phase.name)),
        )
        if phase.gate:
            add(phase.gate, make_gate(phase.topic, phase.build))
            graph.add_conditional_edges(
                phase.gate, after_gate, {"launch": phase.launch, "replan": "plan", "stop": "report"}
            )
        graph.add_edge(phase.launch, phase.monitor)
        graph.add_conditional_edges(phase.monitor, after_monitor, {"done": following, "failed": "failure_gate"})

    graph.add_conditional_edges("gate_deploy", after_deploy_gate, ["deploy", "report"])
    graph.add_edge("deploy", "report")
    graph.add_conditional_edges("failure_gate", retry_target, ["report", *(phase.launch for phase in PHASES)])
    graph.add_edge("report", END)
    return graph.compile(checkpointer=checkpointer, name="eyas")
