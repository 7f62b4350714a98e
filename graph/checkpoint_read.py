"""A run's last checkpoint as LangGraph's `get_state` shows it (its values, the nodes next, the questions waiting),
read from the SQLite DB with ormsgpack alone: `eyas status`, `eyas runs` and the dashboard read runs without
importing LangGraph, which costs about a second of every such command.

It reads what the pipeline writes: checkpoint format 4 in msgpack; each node woken by its own `branch:to:` channel
(or `__start__`), which LangGraph clears once the node ran; one node at a time; LangGraph's `Interrupt` the only
extension type; a step's writes that leave the state as its checkpoint has it. Anything else (a fan-out, a node that
finished but whose step has no checkpoint yet, an unknown type) raises `Unfamiliar`, and the caller asks LangGraph.
tests/unit/test_checkpoint_read.py compares the two on real runs and holds the pipeline to these shapes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import ormsgpack

FORMAT = 4  # LangGraph's checkpoint format ("v"); it migrates older ones, which it therefore reads itself
START = "__start__"
BRANCH = "branch:to:"
PULL_PATH = "~__pregel_pull, "  # a node's task, in the writes' task_path
NULL_TASK = "00000000-0000-0000-0000-000000000000"  # input to the superstep (an answer to a gate), not a task
INTERRUPT, RESUME, ERROR, ERROR_SOURCE = "__interrupt__", "__resume__", "__error__", "__error_source_node__"
CONTROL = frozenset((INTERRUPT, RESUME, ERROR, ERROR_SOURCE))  # what happened to a task, not what it produced
_EXT_KWARGS = 2  # LangGraph's msgpack extension: (module, class, keyword arguments)


class Unfamiliar(Exception):
    """A checkpoint outside the shapes this reader knows: LangGraph reads it."""


@dataclass(frozen=True)
class Question:
    """An interrupt waiting for its answer: its id and what it asks (the gate's view)."""

    id: str
    value: Any


@dataclass(frozen=True)
class StoredState:
    values: dict[str, Any]
    next: tuple[str, ...]
    interrupts: tuple[Question, ...]


@cache
def state_channels(schema: type) -> dict[str, Callable[[], Any] | None]:
    """The state's keys in order, each with the empty value LangGraph gives a key with a reducer before anything
    was written to it (`decisions: Annotated[list, operator.add]` reads as []); None for a plain key."""
    empty: dict[str, Callable[[], Any] | None] = {}
    for key, hint in get_type_hints(schema, include_extras=True).items():
        reducer = get_origin(hint) is Annotated and callable(hint.__metadata__[-1])
        base = get_args(hint)[0] if reducer else None
        empty[key] = (get_origin(base) or base) if reducer else None
    return empty


def read_latest(connection: sqlite3.Connection, thread_id: str, schema: type) -> StoredState:
    """The thread's last checkpoint in the root namespace, as LangGraph shows a thread's current state."""
    try:
        row = connection.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id,),
        ).fetchone()
        if row is None:
            return StoredState({}, (), ())
        checkpoint_id, kind, blob = row
        writes = connection.execute(
            "SELECT task_id, task_path, channel, type, value FROM writes WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND checkpoint_id = ? ORDER BY task_id, idx",
            (thread_id, checkpoint_id),
        ).fetchall()
    except sqlite3.Error as exc:  # an older table layout, or a damaged DB: LangGraph says which
        raise Unfamiliar(str(exc)) from None
    checkpoint = _decoded(kind, blob)
    if not isinstance(checkpoint, dict) or checkpoint.get("v") != FORMAT:
        raise Unfamiliar(f"checkpoint format {checkpoint.get('v') if isinstance(checkpoint, dict) else '?'}")
    stored = checkpoint["channel_values"]
    empty = state_channels(schema)
    values = {}
    for key, make in empty.items():  # in the state's order, as LangGraph reads its channels
        if key in stored:
            values[key] = stored[key]
        elif make is not None:
            values[key] = make()
    triggered = _triggered(set(stored) - set(empty))
    finished, questions = _tasks(writes, set(empty))
    waiting = tuple(name for name in triggered if name not in finished)
    return StoredState(values, waiting, tuple(q for name in waiting for q in questions.get(name, ())))


def _triggered(channels: set[str]) -> list[str]:
    """The nodes a step woke: each node's trigger is a channel LangGraph clears once the node has run (an
    `EphemeralValue`), so one that holds a value names a node still to run (LangGraph's `_triggers`)."""
    nodes = []
    for channel in sorted(channels):
        if channel != START and not channel.startswith(BRANCH):
            raise Unfamiliar(f"channel {channel}")  # a join, a fan-out's sends, or a key the state lost
        nodes.append(channel.removeprefix(BRANCH))
    if len(nodes) > 1:
        raise Unfamiliar(f"nodes {nodes} at once")  # their order is the graph's
    return nodes


def _tasks(writes: list[tuple[Any, ...]], state_keys: set[str]) -> tuple[set[str], dict[str, list[Question]]]:
    """From the superstep's writes: the nodes that finished it, and each node's latest questions."""
    finished: set[str] = set()
    questions: dict[str, list[Question]] = {}
    for task_id, path, channel, kind, blob in writes:
        if task_id == NULL_TASK:
            if channel not in CONTROL:
                raise Unfamiliar(f"input to {channel}")  # applied with the channel's reducer
            continue
        if not path.startswith(PULL_PATH):
            raise Unfamiliar(f"task {path or task_id}")
        node = path.removeprefix(PULL_PATH)
        if channel == INTERRUPT:
            value = _decoded(kind, blob)
            questions[node] = [_question(one) for one in (value if isinstance(value, list) else [value])]
        elif channel not in CONTROL:
            if channel in state_keys:
                raise Unfamiliar(f"{node} finished, its writes not yet in a checkpoint")  # applied with reducers
            finished.add(node)
    return finished, questions


def _question(value: Any) -> Question:
    if not isinstance(value, Question):
        raise Unfamiliar(f"interrupt {type(value).__name__}")
    return value


def _decoded(kind: str, blob: bytes | None) -> Any:
    if kind == "null":
        return None
    if kind != "msgpack" or blob is None:
        raise Unfamiliar(f"a value stored as {kind}")
    try:
        return ormsgpack.unpackb(blob, ext_hook=_extension, option=ormsgpack.OPT_NON_STR_KEYS)
    except ValueError as exc:  # an unknown extension (its hook's error is not passed on) or a damaged value
        raise Unfamiliar(str(exc)) from None


def _extension(code: int, data: bytes) -> Question:
    module, name, kwargs = ormsgpack.unpackb(data, ext_hook=_extension, option=ormsgpack.OPT_NON_STR_KEYS)
    if (code, module, name) != (_EXT_KWARGS, "langgraph.types", "Interrupt") or "id" not in kwargs:
        raise ValueError(f"{module}.{name}")
    return Question(kwargs["id"], kwargs.get("value"))
