"""One researcher: search, read and look at the host, then compress what the sources establish into Findings.

The first search is the question itself, made before the model is asked anything, so even a weak model
leaves with evidence. Model failures (unusable output after a repair round) end the loop or become the
result's `error`, shown in the report; a server that cannot be reached raises, so the run can be resumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from eyas.agents.evidence import DocSearch, Evidence
from eyas.agents.llm import LLM, LlmBadOutput, LlmProfile
from eyas.agents.prompts import CHARS_PER_TOKEN, fit, prompt, tokens
from eyas.agents.research_report import Findings, ResearcherResult, Source, findings_model
from eyas.agents.structured import OUTPUT_CHARS_PER_TOKEN, Call, Message, tool_result
from eyas.tools.hosts.http import HttpClient
from eyas.tools.web.search import WebSearch


class Search(BaseModel):
    """Search the web for a query (when offline: the documentation installed on the host)."""

    query: str = Field(min_length=2, max_length=200)


class Fetch(BaseModel):
    """Read one source in full, by its number (or a URL)."""

    source: str = Field(min_length=1, max_length=500)


class Done(BaseModel):
    """Stop researching: the sources found so far answer the question."""


TOOLS: list[type[BaseModel]] = [Search, Fetch, Done]


class ResearchSettings(BaseModel):
    max_questions: int = Field(4, ge=1, le=8, description="researchers working at once, at most")
    max_steps: int = Field(3, ge=0, le=10, description="tool rounds per researcher after its first search")
    per_search: int = Field(5, ge=1, le=20, description="results per search")
    page_chars: int = Field(8000, ge=500, description="longest text kept of a fetched page")
    local_docs: list[str] = Field(default_factory=list, description="files on this machine searched when offline")
    plan_tokens: int = 400
    step_tokens: int = 300
    findings_tokens: int = 1500
    synthesis_tokens: int = 2500

    def output_tokens(self, wanted: int, profile: LlmProfile) -> int:
        """A third of a small context at most, so the prompt keeps the rest."""
        return max(64, min(wanted, profile.context_tokens // 3))


class Assignment(BaseModel):
    """What the supervisor hands one researcher (the payload of its Send)."""

    index: int
    question: str
    host_summary: str
    host_sources: list[Source]
    workloads_dir: str | None
    profile: LlmProfile


@dataclass
class Kit:
    llm: LLM
    search: WebSearch
    http: HttpClient
    docs: list[DocSearch]
    settings: ResearchSettings


def research(assignment: Assignment, kit: Kit) -> ResearcherResult:
    settings, profile = kit.settings, assignment.profile
    evidence = Evidence(kit.search, kit.http, kit.docs, per_search=settings.per_search, page_chars=settings.page_chars)
    for source in assignment.host_sources:
        evidence.add(source)
    evidence.search(assignment.question)
    system = prompt("researcher", question=assignment.question, host=assignment.host_summary)
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Sources so far:\n{evidence.listing()}\n\nSearch more, read a source, or stop."},
    ]
    step_tokens = settings.output_tokens(settings.step_tokens, profile)
    for _ in range(settings.max_steps):
        if tokens(str(messages)) + step_tokens > profile.context_tokens * 0.9:
            break  # the conversation would no longer fit the model's context
        try:
            turn = kit.llm.step(messages, TOOLS, mode=profile.tool_mode, max_tokens=step_tokens)
        except LlmBadOutput:
            break  # the evidence so far is still worth compressing
        messages.append(turn.message)
        messages += [tool_result(call.id, _run(call, evidence)) for call in turn.calls]
        if not turn.calls or any(isinstance(call.arguments, Done) for call in turn.calls):
            break
    findings, error = _compress(assignment, evidence, kit)
    return ResearcherResult(
        index=assignment.index,
        question=assignment.question,
        sources=evidence.sources,
        findings=findings,
        web=evidence.web,
        web_failure=evidence.web_failure,
        error=error,
    )


def _run(call: Call, evidence: Evidence) -> str:
    args = call.arguments
    if isinstance(args, Search):
        return evidence.search(args.query)
    if isinstance(args, Fetch):
        return evidence.fetch(args.source)
    return "Stopped."


def _compress(assignment: Assignment, evidence: Evidence, kit: Kit) -> tuple[Findings | None, str | None]:
    """The sources, as much of each as fits, become Findings citing them by number."""
    profile = assignment.profile
    out_tokens = kit.settings.output_tokens(kit.settings.findings_tokens, profile)
    system = prompt("findings", question=assignment.question)
    heads = [f"[{n}] ({s.origin}) {s.title} <{s.url}>" for n, s in enumerate(evidence.sources, start=1)]
    room = (profile.context_tokens - out_tokens - tokens(system)) * CHARS_PER_TOKEN * 0.85
    excerpts = fit([source.excerpt for source in evidence.sources], int(room) - sum(len(h) + 2 for h in heads))
    body = "\n\n".join(f"{head}\n{excerpt}" for head, excerpt in zip(heads, excerpts, strict=True))
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": body}]
    try:
        bounded = findings_model(out_tokens * OUTPUT_CHARS_PER_TOKEN)
        answer = kit.llm.structured(messages, bounded, max_tokens=out_tokens)
        return Findings.model_validate(answer.model_dump()), None
    except LlmBadOutput as exc:
        return None, str(exc)
