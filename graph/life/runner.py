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

from eyas.graph.context import RunContext, RunGraph
from eyas.graph.downtime import restore
from eyas.graph.phases.evaluate.record import run_evaluation
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


@dataclass(frozen=True)
class RunView:
    """A stored run as its last checkpoint shows it, read without driving it."""

    state: dict[str, Any]
    pending: tuple[str, dict[str, Any]] | None  # the gate it waits at: (interrupt id, what the gate shows)
    ended: bool
    started: bool = True


def run_condition(run: RunDir, view: RunView) -> str:
    """One phrase for where a stored run stands: running, waiting at a gate, ended, stopped, or never started."""
    if run.is_driven():
        return "running"
    if not view.started:
        return f"{run.meta().get('kind') or 'pipeline'}, no checkpoint"
    return "waiting at a gate" if view.pending else ("ended" if view.ended else "stopped")


@contextmanager
def reading_checkpoints(run: RunDir) -> Iterator[SqliteSaver]:
    """The run's checkpoint DB opened read-only: reading a run (`eyas status`, `eyas runs`, the dashboard) works on
    a full or read-only runs folder and never creates or changes a file."""
    connection = connect_read_only(run.checkpoints, check_same_thread=False)
    try:
        yield redacted_saver(connection)
    finally:
        connection.close()


def read_run(run: RunDir) -> RunView:
    """Read-only: a run without a checkpoint (a chat, or a pipeline that never started) gets no empty DB."""
    if not run.checkpoints.exists():
        return RunView({}, None, ended=False, started=False)
    with reading_checkpoints(run) as saver:
        snapshot = build_graph(saver).get_state(thread(run))
    pending = (snapshot.interrupts[0].id, snapshot.interrupts[0].value) if snapshot.interrupts else None
    return RunView(dict(snapshot.values), pending, ended=not snapshot.next)


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
    """One line on how a drive ended (finished, failed, stopped, or waiting at a gate) and where its report is."""
    if outcome.gate is not None:
        return f"{gate_message(run, outcome.gate)} Report so far: {report}"
    state = outcome.state
    failure, evaluation = state.get("failure"), run_evaluation(state)
    if failure:
        what = f"failed: job {failure['job_id']} {failure['status']}: {failure['diagnosis']}"
    elif state.get("stopped"):
        what = f"stopped: {state['stopped']}"
    elif evaluation:
        length, speedup, ngram = evaluation.mean_acceptance_length, evaluation.speedup, evaluation.ngram_speedup()
        what = (
            f"finished: mean acceptance length {'not measured' if length is None else f'{length:.2f}'} at "
            f"k={evaluation.k}, speedup {'not measured' if speedup is None else f'{speedup:.2f}x'} "
            f"({'n-gram not measured' if ngram is None else f'n-gram {ngram:.2f}x'})"
        )
    else:
        what = f"ended after the {state.get('phase', 'first')} phase"
    return f"eyas run {run.run_id} {what}. Report: {report}"


def notify(ctx: RunContext, outcome: Outcome, report: Path) -> None:
    """Tell someone the run ended or waits: the policy's notify command (e.g. a webhook via curl) gets the message
    on stdin and in $EYAS_MESSAGE, with $EYAS_RUN, $EYAS_REPORT and, at a gate, $EYAS_GATE."""
    message = Redactor().text(end_message(ctx.run, outcome, report))
    ctx.on_note(message)
    env = {"EYAS_RUN": ctx.run.run_id, "EYAS_REPORT": str(report)}
    if outcome.gate_id is not None:
        env["EYAS_GATE"] = outcome.gate_id
    send_notice(ctx.policy.notify_command if ctx.policy else None, message, env)
