"""Which checkpoint a resumed run continued from, recorded so that its replay continues from the same point.

A run killed in the middle of a node leaves that node cut short in its transcript; `eyas resume` runs the node
again from its start. The resume event marks that boundary: replay stops the first try where the crash stopped
it, checks that its own checkpoint is the one the resume started from, and goes on from there.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from eyas.graph.context import RunGraph
from eyas.tools.recording.boundary import Boundary


def resume_point(graph: RunGraph, config: RunnableConfig) -> dict[str, Any]:
    """The thread's last checkpoint: its step, the nodes it runs next (both the same on replay) and its id."""
    snapshot = graph.get_state(config)
    step = (snapshot.metadata or {}).get("step")
    checkpoint = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
    return {"step": step, "next": sorted(snapshot.next), "checkpoint_id": checkpoint}


def note_resume(boundary: Boundary, graph: RunGraph, config: RunnableConfig) -> None:
    """Record (or, on replay, check) the checkpoint the run continues from."""
    boundary.note("resume", resume_point(graph, config))
