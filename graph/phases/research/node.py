"""Research before acting: parallel subagents and one cited report, when the agent has a capable LLM: the config's
[agent], else production's own server when it serves a capable model (agents/llm_choice.py)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.agents.llm import open_llm
from eyas.agents.llm_choice import LlmChoice, choose_llm
from eyas.agents.research import ResearchDeps, run_research
from eyas.agents.research_report import short_summary
from eyas.graph.context import RunContext
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState
from eyas.tools.web.search import WebSearch

BRIEF = (
    "How to train an EAGLE-3 speculative-decoding drafter for the model this host serves ({model}), with the "
    "vLLM and speculators versions installed there: methods, the training framework and its flags, and "
    "existing drafters to start from."
)


def research_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    if run_facts(state).research is not None:
        return {"phase": "research"}
    choice = research_llm(ctx)
    if choice is None:
        return {"phase": "research"}
    deps = ResearchDeps(
        llm=open_llm(choice, boundary=ctx.boundary),
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


def research_llm(ctx: RunContext) -> LlmChoice | None:
    """The agent's LLM for research, said as the run's first line; None (research skipped, and said why) when only
    the embedded model is left, which researches nothing a gate could use."""
    choice = choose_llm(ctx.config, ctx.http, lambda: ctx.host)
    if not choice.capable:
        ctx.on_note(f"research: skipped; the agent's LLM would be {choice.shown()}. `eyas research` runs it alone.")
        return None
    ctx.on_note(f"research: the agent's LLM is {choice.shown()}")
    return choice
