"""Research: a supervisor splits a brief into questions, parallel researchers answer one each, and a
synthesizer writes one cited report to <out_dir>/research.md.

    START -> plan ------\\
    START -> cli_help ---> assign -> researcher x N (one Send each) -> synthesize -> END

`plan` reads the host's versions (a second) and has the supervisor write questions about them, while
`cli_help` reads the --help of the host's vllm and speculators (10-30 s the first time).

Each researcher is its own LangGraph task: after a crash only the unfinished ones run again (when the
graph runs under a checkpointer, e.g. inside a pipeline node, whose checkpointer it inherits).
Each node runs through the run's Boundary as a task of its own, so parallel branches replay in order.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send
from pydantic import BaseModel, Field, create_model

from eyas.agents.evidence import DocSearch, help_sources
from eyas.agents.llm import LLM, LlmBadOutput, LlmProfile
from eyas.agents.prompts import CHARS_PER_TOKEN, fit, prompt, tokens
from eyas.agents.research_report import (
    ResearcherResult,
    ResearchReport,
    Synthesis,
    describe_checks,
    host_checks,
    number_sources,
    render,
    renumbered,
    strip_unknown_citations,
    synthesis_model,
)
from eyas.agents.researcher import Assignment, Kit, ResearchSettings, research
from eyas.agents.structured import OUTPUT_CHARS_PER_TOKEN
from eyas.tools.checks.host_facts import HostFacts, installed_versions, local_docs_script, read_cli_help
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.private_files import write_private
from eyas.tools.recording.boundary import Boundary
from eyas.tools.settings.config import HostConfig, TargetConfig
from eyas.tools.web.search import WebSearch

REPORT_NAME = "research.md"
HELP_NAME = "host-help.json"


def _ignore(_: str) -> None:
    return None


@dataclass
class ResearchDeps:
    """The live objects research uses (never checkpointed); wrap them in the run's recorder to record."""

    llm: LLM
    search: WebSearch
    http: HttpClient
    host: Host
    host_config: HostConfig
    target: TargetConfig
    out_dir: Path
    boundary: Boundary = field(default_factory=Boundary)
    local_host: Host | None = None  # this machine, to search settings.local_docs
    settings: ResearchSettings = field(default_factory=ResearchSettings)
    on_event: Callable[[str], None] = _ignore


class ResearchPlan(BaseModel):
    """The supervisor's structured answer."""

    questions: list[str] = Field(min_length=1)


def plan_model(max_questions: int, chars: int) -> type[ResearchPlan]:
    """At most `max_questions`, each short enough that the whole answer fits the token limit."""
    each = max(40, min(300, chars // max_questions - 10))
    question = Annotated[str, Field(min_length=3, max_length=each)]
    return create_model(
        "ResearchPlan",
        __base__=ResearchPlan,
        questions=(list[question], Field(min_length=1, max_length=max_questions)),
    )


class ResearchState(TypedDict, total=False):
    brief: str
    profile: dict[str, Any]
    versions: dict[str, Any]  # HostFacts with the versions
    help: dict[str, Any]  # HostFacts of the --help probe, without the texts
    help_file: str  # the texts, as JSON {command: text}
    questions: list[str]
    notes: Annotated[list[str], operator.add]
    results: Annotated[list[dict[str, Any]], operator.add]
    report: dict[str, Any]


def build_research_graph(deps: ResearchDeps) -> CompiledStateGraph:
    def node(name: str, fn: Callable[[Any], dict[str, Any]], task: Callable[[Any], str] | None = None) -> Any:
        """`fn` run through the boundary as its own task (each researcher a task of its own)."""

        def run(state: Any) -> dict[str, Any]:
            return deps.boundary.node(name, fn, state, task=task(state) if task else name)

        return run

    graph = StateGraph(ResearchState)
    graph.add_node("cli_help", node("cli_help", lambda state: _cli_help(deps)))
    graph.add_node("plan", node("plan", lambda state: _plan(deps, state)))
    graph.add_node("assign", lambda state: {})  # waits for both the plan and the --help probe
    researcher = node("researcher", lambda payload: _researcher(deps, payload), lambda p: f"researcher-{p['index']}")
    graph.add_node("researcher", researcher)
    graph.add_node("synthesize", node("synthesize", lambda state: _synthesize(deps, state)))
    graph.add_edge(START, "plan")
    graph.add_edge(START, "cli_help")
    graph.add_edge(["plan", "cli_help"], "assign")
    graph.add_conditional_edges("assign", _dispatch, ["researcher"])
    graph.add_edge("researcher", "synthesize")
    graph.add_edge("synthesize", END)
    return graph.compile()


def run_research(brief: str, deps: ResearchDeps) -> ResearchReport:
    """Research `brief` and write <out_dir>/research.md; inside a checkpointed graph node it resumes too."""
    final = build_research_graph(deps).invoke({"brief": brief})
    return ResearchReport.model_validate(final["report"])


def _cli_help(deps: ResearchDeps) -> dict[str, Any]:
    """The help texts (~200 kB) go to a file in the run folder; the state keeps its path."""
    facts = read_cli_help(deps.host, deps.host_config)
    deps.out_dir.mkdir(parents=True, exist_ok=True)
    path = deps.out_dir / HELP_NAME
    write_private(path, json.dumps(facts.help))
    deps.on_event(f"host: read the --help of {len(facts.help)} command(s)")
    return {"help": facts.model_copy(update={"help": {}}).model_dump(), "help_file": str(path)}


def _plan(deps: ResearchDeps, state: ResearchState) -> dict[str, Any]:
    facts = installed_versions(deps.host, deps.host_config, deps.target, deps.http)
    deps.on_event(f"host: {facts.summary()}")
    profile = deps.llm.profile()
    settings = deps.settings
    system = prompt("supervisor", max_questions=settings.max_questions, host=facts.summary())
    messages = [{"role": "system", "content": system}, {"role": "user", "content": state["brief"]}]
    notes = []
    try:
        out_tokens = settings.output_tokens(settings.plan_tokens, profile)
        bounded = plan_model(settings.max_questions, out_tokens * OUTPUT_CHARS_PER_TOKEN)
        plan = deps.llm.structured(messages, bounded, max_tokens=out_tokens)
        questions = _clean(plan.questions)[: settings.max_questions]
    except LlmBadOutput as exc:
        questions = []
        notes.append(f"The supervisor gave no usable questions ({exc}).")
    if not questions:
        questions = [state["brief"]]
        notes.append("The brief was researched as a single question.")
    deps.on_event(f"supervisor: {len(questions)} question(s), tools {profile.tool_mode}")
    return {"versions": facts.model_dump(), "profile": profile.model_dump(), "questions": questions, "notes": notes}


def _clean(questions: list[str]) -> list[str]:
    """Without list numbering, blanks and repeats (small models number and repeat)."""
    seen: set[str] = set()
    kept = []
    for question in questions:
        text = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", question).strip()
        # A question has words: small models also answer "Question 1" or "1.1.1.1".
        if len(re.findall(r"[A-Za-z]{3,}", text)) >= 3 and text.lower() not in seen:
            seen.add(text.lower())
            kept.append(text)
    return kept


def _dispatch(state: ResearchState) -> list[Send]:
    """One researcher per question, each with the host's --help entries its question points at."""
    facts = _facts(state)
    profile = LlmProfile.model_validate(state["profile"])
    host_chars = int(min(4000, profile.context_tokens * CHARS_PER_TOKEN / 5))
    return [
        Send(
            "researcher",
            Assignment(
                index=index,
                question=question,
                host_summary=facts.summary(),
                host_sources=help_sources(facts, question, host_chars),
                workloads_dir=facts.workloads_dir,
                profile=profile,
            ).model_dump(mode="json"),
        )
        for index, question in enumerate(state["questions"], start=1)
    ]


def _researcher(deps: ResearchDeps, payload: dict[str, Any]) -> dict[str, Any]:
    assignment = Assignment.model_validate(payload)
    docs = []
    if assignment.workloads_dir:
        script = f"{assignment.workloads_dir}/package_docs.py"
        docs.append(DocSearch(deps.host, deps.host_config.python, script))
    if deps.settings.local_docs and deps.local_host is not None:
        python, script = local_docs_script()
        docs.append(DocSearch(deps.local_host, python, script, deps.settings.local_docs, False, "local"))
    kit = Kit(llm=deps.llm, search=deps.search, http=deps.http, docs=docs, settings=deps.settings)
    result = research(assignment, kit)
    outcome = f"{len(result.sources)} sources" + (f", no findings: {result.error}" if result.error else "")
    deps.on_event(f"researcher {assignment.index}: {outcome}")
    return {"results": [result.model_dump(mode="json")]}


def _synthesize(deps: ResearchDeps, state: ResearchState) -> dict[str, Any]:
    results = sorted((ResearcherResult.model_validate(r) for r in state["results"]), key=lambda r: r.index)
    profile = LlmProfile.model_validate(state["profile"])
    facts = _facts(state)
    sources, numbers = number_sources(results)
    blocks = [_findings_block(result, mine) for result, mine in zip(results, numbers, strict=True)]
    checks = host_checks(blocks, facts)
    settings = deps.settings
    out_tokens = settings.output_tokens(settings.synthesis_tokens, profile)
    system = prompt("synthesizer", brief=state["brief"], host_checks=describe_checks(checks, facts))
    room = int((profile.context_tokens - out_tokens - tokens(system)) * CHARS_PER_TOKEN * 0.85)
    user = "\n\n".join(fit(blocks, room))
    notes = list(state.get("notes", []))
    synthesis: Synthesis | None = None
    try:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        bounded = synthesis_model(out_tokens * OUTPUT_CHARS_PER_TOKEN)
        answer = deps.llm.structured(messages, bounded, max_tokens=out_tokens)
        synthesis = Synthesis.model_validate(answer.model_dump())
    except LlmBadOutput as exc:
        notes.append(f"No synthesis: {exc}")
    if synthesis is not None:
        summary, removed = strip_unknown_citations(synthesis.summary, len(sources))
        synthesis = synthesis.model_copy(update={"summary": summary})
        if removed:
            notes.append(f"{removed} citation(s) in the summary named no source and were removed.")
        checks = host_checks([*blocks, summary, *synthesis.disagreements], facts)
    failures = sorted({r.web_failure for r in results if r.web == "unavailable" and r.web_failure})
    notes += [f"Web search: {failure}" for failure in failures]
    offline = sum(r.web == "unavailable" for r in results)
    report = ResearchReport(
        brief=state["brief"],
        questions=state["questions"],
        results=results,
        sources=sources,
        numbers=numbers,
        host=facts.model_copy(update={"help": {}}),
        help_read=sorted(facts.help),
        host_checks=checks,
        synthesis=synthesis,
        notes=notes,
        web="ok" if not offline else "unavailable" if offline == len(results) else "partial",
        usage=deps.llm.usage.as_dict(),
        path=str(deps.out_dir / REPORT_NAME),
    )
    deps.out_dir.mkdir(parents=True, exist_ok=True)
    write_private(deps.out_dir / REPORT_NAME, render(report))
    deps.on_event(f"report: {report.path}")
    return {"report": report.model_dump(mode="json")}


def _findings_block(result: ResearcherResult, numbers: list[int]) -> str:
    head = f"Question {result.index}: {result.question}"
    if result.findings is None:
        return f"{head}\nNo findings ({result.error})."
    findings = renumbered(result.findings, numbers)
    facts = "\n".join(f"- {fact.claim} {''.join(f'[{n}]' for n in fact.sources)}" for fact in findings.facts)
    disagreements = "".join(f"\nDisagreement: {line}" for line in findings.disagreements)
    return f"{head}\n{findings.summary}\n{facts}{disagreements}".strip()


def _facts(state: ResearchState) -> HostFacts:
    versions = HostFacts.model_validate(state["versions"])
    texts = json.loads(Path(state["help_file"]).read_text())
    return versions.merged(HostFacts.model_validate(state["help"]).model_copy(update={"help": texts}))
