"""Research before acting: parallel subagents and one cited report (run when an agent LLM is configured)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.agents.llm import open_llm
from eyas.agents.research import ResearchDeps, run_research
from eyas.agents.research_report import short_summary
from eyas.graph.context import RunContext
from eyas.graph.state import RunState
from eyas.tools.web.search import WebSearch

BRIEF = (
    "How to train an EAGLE-3 speculative-decoding drafter for the model this host serves ({model}), with the "
    "vLLM and speculators versions installed there: methods, the training framework and its flags, and "
    "existing drafters to start from."
)


def research_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    if ctx.config.agent is None or state.get("research") is not None:
        ctx.on_note("research: skipped (no [agent] LLM in the config; `eyas research` runs it on its own)")
        return {"phase": "research"}
    deps = ResearchDeps(
        llm=open_llm(ctx.config, boundary=ctx.boundary),
        search=WebSearch(boundary=ctx.boundary),
        http=ctx.http,
        host=ctx.host,
        host_config=ctx.host_config,
        target=ctx.config.target,
        out_dir=ctx.run.root,
        boundary=ctx.boundary,
        on_event=ctx.on_note,
    )
    report = run_research(BRIEF.format(model=ctx.config.target.model), deps)
    return {"phase": "research", "research": str(report.path), "research_summary": short_summary(report)}
