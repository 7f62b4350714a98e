"""Drive a run: stream the graph, stop at gates, take answers from this terminal, another one, or a policy."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from eyas.graph.checkpoint_read import Question, StoredState
from eyas.graph.context import RunContext, RunGraph
from eyas.graph.downtime import restore
from eyas.graph.phases.deploy.record import deploy_record
from eyas.graph.phases.report.headline import headline
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.notify import send_notice
from eyas.tools.recording.redact import Redactor
from eyas.tools.sqlite_read import connect_read_only
from eyas.tools.sqlite_write import writable_db

# The terminal's question at a gate: shown the gate's view, it waits for an answer here or from elsewhere.
Ask = Callable[[dict[str, Any], Callable[[], GateAnswer | None]], GateAnswer]


@dataclass(frozen=True)
class Outcome:
    """How a drive ended: finished, or waiting at a gate (with its id and what it shows)."""

    finished: bool
    state: dict[str, Any]
    gate_id: str | None = None
    gate: dict[str, Any] | None = None


class RedactingSerializer(JsonPlusSerializer):
    """Stores every value with its strings redacted, as the transcript does: an operator's chat line, a model
    repeating it or a tool's output all end up in a checkpoint, which must keep no secret."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return super().dumps_typed(Redactor().value(obj))


def redacted_saver(connection: sqlite3.Connection) -> SqliteSaver:
    """A SQLite checkpointer that keeps no secret (the pipeline's and the chat's)."""
    return SqliteSaver(connection, serde=RedactingSerializer())


@contextmanager
def checkpointer(run: RunDir) -> Iterator[SqliteSaver]:
    """The run's checkpoint DB, created owner-only; a full or read-only disk is said as such (`writable_db`)."""
    with writable_db(run.create().checkpoints) as connection:
        yield redacted_saver(connection)


@contextmanager
def reading_checkpoints(run: RunDir) -> Iterator[SqliteSaver]:
    """The run's checkpoint DB opened read-only, for LangGraph to read (`graph_state`): reading a run works on a full
    or read-only runs folder and never creates or changes a file."""
    connection = connect_read_only(run.checkpoints, check_same_thread=False)
    try:
        yield redacted_saver(connection)
    finally:
        connection.close()


def graph_state(run: RunDir) -> StoredState:
    """The run's last checkpoint as LangGraph itself reads it: for a checkpoint graph/checkpoint_read.py leaves to
    it (graph/life/run_view.py), and for the test that holds that reader to LangGraph's answers."""
    with reading_checkpoints(run) as saver:
        snapshot = build_graph(saver).get_state(thread(run))
    questions = tuple(Question(interrupt.id, interrupt.value) for interrupt in snapshot.interrupts)
    return StoredState(dict(snapshot.values), tuple(snapshot.next), questions)


def thread(run: RunDir) -> RunnableConfig:
    return {"configurable": {"thread_id": run.run_id}}


def pending_gate(graph: RunGraph, run: RunDir) -> tuple[str, dict[str, Any]] | None:
    interrupts = graph.get_state(thread(run)).interrupts
    return (interrupts[0].id, interrupts[0].value) if interrupts else None


def drive(
    graph: RunGraph,
    ctx: RunContext,
    first: Any,
    *,
    ask: Ask | None,
    on_update: Callable[[dict[str, Any]], None],
) -> Outcome:
    """Advance the run until it ends or waits at a gate nobody here can answer.

    `first` is the initial input, or None to continue from the last checkpoint. A gate is answered by an
    answer recorded with `eyas approve`, else by `ask` (the terminal); without `ask` the run stops there.
    """
    config = thread(ctx.run)
    if first is None:
        # A run that died with production stopped starts it again before anything else.
        restore(ctx, "eyas resume: the run had stopped it and ended without starting it")
    value = first
    while True:
        for update in graph.stream(value, config, context=ctx, durability="sync", stream_mode="updates"):
            on_update(update)
        pending = pending_gate(graph, ctx.run)
        if pending is None:
            return Outcome(finished=True, state=dict(graph.get_state(config).values))
        gate_id, view = pending
        answer = ctx.boundary.cross("approval", approval_request(view), partial(ask_for, ctx, gate_id, view, ask))
        if answer.get("decision") is None:
            return Outcome(finished=False, state=dict(graph.get_state(config).values), gate_id=gate_id, gate=view)
        value = Command(resume=resume_value(answer))


def approval_request(view: dict[str, Any]) -> dict[str, Any]:
    """The gate as the transcript keys it: its phase (or failed job) and what it showed."""
    gate = view.get("phase", "?") if view.get("kind") == "gate" else f"failure:{view.get('phase', '?')}"
    return {"gate": gate, "plan": view}


def ask_for(ctx: RunContext, gate_id: str, view: dict[str, Any], ask: Ask | None) -> dict[str, Any]:
    """An answer recorded with `eyas approve`, else the terminal's; no decision when nobody can answer. The
    terminal's answer is recorded like any other, so when another answered a moment before, theirs counts."""
    answer = ctx.run.answer_for(gate_id)
    if answer is None and ask is not None:
        answer = ctx.run.settle_answer(gate_id, ask(view, partial(ctx.run.answer_for, gate_id)))
    if answer is None:
        return {"decision": None}
    return {"decision": answer.action, "reason": answer.reason, "who": answer.who, "sizes": answer.sizes}


def resume_value(crossing: dict[str, Any]) -> dict[str, Any]:
    """The answer the gate resumes with, from the approval crossing (live or replayed), as plain JSON."""
    answer = GateAnswer(
        action=crossing["decision"],
        reason=crossing.get("reason", ""),
        who=crossing.get("who", "operator"),
        sizes=crossing.get("sizes") or None,
    )
    return answer.model_dump(exclude_none=True)


def gate_message(run: RunDir, view: dict[str, Any]) -> str:
    if view.get("kind") == "failure":
        what = f"job {view['job_id']} {view['status']}: {view['diagnosis']}"
    else:
        policy = view.get("policy")
        why = f"the policy stops here: {policy['reasons']}" if policy else "waiting for approval"
        what = f"the {view['phase']} gate: {why}"
    return (
        f"eyas run {run.run_id} stopped at {what}. Answer with `eyas approve {run.run_id}` "
        f"(or --reject --reason TEXT), then `eyas resume {run.run_id}`."
    )


def end_message(run: RunDir, outcome: Outcome, report: Path) -> str:
    """One line on how a drive ended and where its report is: at a gate, what it waits for; otherwise the report's
    own headline (deployed, rolled back and why, stopped where, failed where), so a notice never says "finished"
    for a drafter production turned away."""
    if outcome.gate is not None:
        return f"{gate_message(run, outcome.gate)} Report so far: {report}"
    what = headline(outcome.state, deploy_record(run)).rstrip(".")
    return f"eyas run {run.run_id}: {what}. Report: {report}"


def notify(ctx: RunContext, outcome: Outcome, report: Path) -> None:
    """Tell someone the run ended or waits: the policy's notify command (e.g. a webhook via curl) gets the message
    on stdin and in $EYAS_MESSAGE, with $EYAS_RUN, $EYAS_REPORT and, at a gate, $EYAS_GATE."""
    message = Redactor().text(end_message(ctx.run, outcome, report))
    ctx.on_note(message)
    env = {"EYAS_RUN": ctx.run.run_id, "EYAS_REPORT": str(report)}
    if outcome.gate_id is not None:
        env["EYAS_GATE"] = outcome.gate_id
    send_notice(ctx.policy.notify_command if ctx.policy else None, message, env)
