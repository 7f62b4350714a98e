"""A stored run as its last checkpoint shows it, read without driving it and, for the usual checkpoint, without
LangGraph (graph/checkpoint_read.py): `eyas status` and `eyas runs` run every few seconds under `watch`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eyas.graph.checkpoint_read import StoredState, Unfamiliar, read_latest
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.sqlite_read import connect_read_only


@dataclass(frozen=True)
class RunView:
    """A stored run as its last checkpoint shows it."""

    state: dict[str, Any]
    pending: tuple[str, dict[str, Any]] | None  # the gate it waits at: (interrupt id, what the gate shows)
    ended: bool
    started: bool = True


def read_run(run: RunDir) -> RunView:
    """Read-only: a run without a checkpoint (a chat, or a pipeline that never started) gets no empty DB."""
    if not run.checkpoints.exists():
        return RunView({}, None, ended=False, started=False)
    stored = stored_state(run)
    pending = (stored.interrupts[0].id, stored.interrupts[0].value) if stored.interrupts else None
    return RunView(stored.values, pending, ended=not stored.next)


def stored_state(run: RunDir) -> StoredState:
    """The run's last checkpoint, read by graph/checkpoint_read.py, else by LangGraph (a shape the reader leaves to
    it)."""
    connection = connect_read_only(run.checkpoints)
    try:
        return read_latest(connection, run.run_id, RunState)
    except Unfamiliar:
        from eyas.graph.life.runner import graph_state  # LangGraph: imported only for such a checkpoint

        return graph_state(run)
    finally:
        connection.close()


def run_condition(run: RunDir, view: RunView) -> str:
    """One phrase for where a stored run stands: running, waiting at a gate, ended, stopped, or never started."""
    if run.is_driven():
        return "running"
    if not view.started:
        return f"{run.meta().get('kind') or 'pipeline'}, no checkpoint"
    return "waiting at a gate" if view.pending else ("ended" if view.ended else "stopped")
