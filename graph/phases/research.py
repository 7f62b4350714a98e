"""Research before acting: parallel subagents and one cited report (skipped without an agent LLM)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.state import RunState


def research_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    if ctx.config.agent is None or state.get("research") is not None:
        ctx.on_note("research: skipped (no [agent] LLM configured, or the run starts from an earlier report)")
        return {"phase": "research"}
    return {"phase": "research"}
