"""The research report: what the researchers found, numbered sources, checks against the host, and research.md."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from eyas.tools.checks.host_facts import HostFacts, found_in
from eyas.tools.web.search import Origin

_CITATION = re.compile(r"\[(\d{1,3})\]")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_SPECULATORS_COMMAND = re.compile(r"\bspeculators\s+([a-z][a-z0-9-]+)")


class Source(BaseModel):
    url: str
    title: str
    origin: Origin
    excerpt: str


class Fact(BaseModel):
    claim: str = Field(min_length=3, max_length=300)
    sources: list[int] = Field(default_factory=list, max_length=4, description="numbers of the sources saying it")


Line = Annotated[str, Field(min_length=3, max_length=300)]


class Findings(BaseModel):
    """What one researcher found, compressed for the synthesizer (the model's structured answer).

    The length limits bound what a rambling small model can emit under guided decoding."""

    summary: str = Field(max_length=600)
    facts: list[Fact] = Field(default_factory=list, max_length=5)
    disagreements: list[Line] = Field(default_factory=list, max_length=3)


class Synthesis(BaseModel):
    """The synthesizer's structured answer."""

    summary: str = Field(max_length=3000, description="markdown answering the brief, citing sources as [n]")
    disagreements: list[Line] = Field(default_factory=list, max_length=4)


def findings_model(chars: int) -> type[Findings]:
    """Findings whose longest valid answer is about `chars` characters, so guided decoding closes the JSON
    within the token limit even when a small model rambles."""
    line = max(60, min(300, chars // 8))
    fact = create_model("Fact", __base__=Fact, claim=(str, Field(min_length=3, max_length=line)))
    return create_model(
        "Findings",
        __base__=Findings,
        summary=(str, Field(max_length=max(120, min(600, chars // 4)))),
        facts=(list[fact], Field(default_factory=list, max_length=4)),
        disagreements=(
            list[Annotated[str, Field(min_length=3, max_length=line)]],
            Field(default_factory=list, max_length=2),
        ),
    )


def synthesis_model(chars: int) -> type[Synthesis]:
    """Synthesis bounded like findings_model."""
    line = max(60, min(300, chars // 10))
    return create_model(
        "Synthesis",
        __base__=Synthesis,
        summary=(str, Field(max_length=max(200, min(6000, chars * 3 // 4)), description="markdown citing [n]")),
        disagreements=(
            list[Annotated[str, Field(min_length=3, max_length=line)]],
            Field(default_factory=list, max_length=2),
        ),
    )


class ResearcherResult(BaseModel):
    index: int
    question: str
    sources: list[Source]
    findings: Findings | None = None
    web: Literal["ok", "unavailable"]
    web_failure: str | None = None
    error: str | None = Field(None, description="why there are no findings (the model's output was unusable)")


class HostCheck(BaseModel):
    """A flag or subcommand the research mentions, looked up in the host's installed --help texts."""

    item: str
    found_in: list[str]


class ResearchReport(BaseModel):
    brief: str
    questions: list[str]
    results: list[ResearcherResult]
    sources: list[Source] = Field(description="numbered from 1, shared by every finding")
    numbers: list[list[int]] = Field(description="per result, the shared number of each of its sources")
    host: HostFacts = Field(description="versions and problems; the help texts stay in the run's host-help.json")
    help_read: list[str] = Field(description="the commands whose --help was read on the host")
    host_checks: list[HostCheck]
    synthesis: Synthesis | None
    notes: list[str]
    web: Literal["ok", "partial", "unavailable"]
    usage: dict[str, int]
    path: str


def number_sources(results: list[ResearcherResult]) -> tuple[list[Source], list[list[int]]]:
    """One list for the whole report (a URL found twice is one source), and each result's numbers in it."""
    shared: list[Source] = []
    by_url: dict[str, int] = {}
    numbers = []
    for result in results:
        mine = []
        for source in result.sources:
            if source.url not in by_url:
                shared.append(source)
                by_url[source.url] = len(shared)
            mine.append(by_url[source.url])
        numbers.append(mine)
    return shared, numbers


def renumbered(findings: Findings, numbers: list[int]) -> Findings:
    """A researcher's own source numbers as the report's; numbers that point nowhere are dropped."""

    def shared(local: list[int]) -> list[int]:
        return [numbers[n - 1] for n in local if 1 <= n <= len(numbers)]

    facts = [fact.model_copy(update={"sources": shared(fact.sources)}) for fact in findings.facts]
    lines = renumbered_lines(findings.disagreements, numbers)
    return findings.model_copy(update={"facts": facts, "disagreements": lines})


def strip_unknown_citations(text: str, count: int) -> tuple[str, int]:
    """Remove [n] markers that name no source; how many were removed."""
    removed = 0

    def keep(match: re.Match[str]) -> str:
        nonlocal removed
        if 1 <= int(match.group(1)) <= count:
            return match.group(0)
        removed += 1
        return ""

    return _CITATION.sub(keep, text), removed


def host_checks(texts: list[str], facts: HostFacts) -> list[HostCheck]:
    """Every vllm/speculators flag and speculators subcommand the texts mention, looked up in the host's help."""
    if not facts.help:
        return []
    corpus = "\n".join(texts)
    items = sorted(set(_FLAG.findall(corpus)))
    items += sorted({f"speculators {sub}" for sub in _SPECULATORS_COMMAND.findall(corpus)})
    checks = []
    for item in items:
        if item.startswith("--"):
            found = found_in(item, facts.help)
        else:
            found = [command for command in facts.help if command == f"{item} --help"]
        checks.append(HostCheck(item=item, found_in=found))
    return checks


def short_summary(report: ResearchReport, chars: int = 600) -> dict[str, Any]:
    """What a gate shows of the research: the start of its synthesis, each flag or command it names and whether
    the host's --help has it, and where the whole report is."""
    summary = report.synthesis.summary if report.synthesis else ""
    checks = [
        f"{check.item}: in `{check.found_in[0]}`" if check.found_in else f"{check.item}: NOT in the installed --help"
        for check in report.host_checks
    ]
    clipped = summary if len(summary) <= chars else summary[: chars - 1].rstrip() + "…"
    return {"summary": clipped, "checks": checks, "path": report.path}


def describe_checks(checks: list[HostCheck], facts: HostFacts) -> str:
    if not facts.help:
        return "nothing could be checked: " + ("; ".join(facts.problems) or "no --help was read")
    lines = [facts.summary()]
    for check in checks:
        where = f"in `{check.found_in[0]}`" if check.found_in else "NOT in any installed --help"
        lines.append(f"{check.item}: {where}")
    return "; ".join(lines)


def render(report: ResearchReport) -> str:
    """research.md: the synthesis first, then how it was checked, the per-question findings, the sources."""
    out = [f"# Research: {report.brief}", ""]
    web = {
        "ok": "web search worked",
        "partial": "web search failed for some researchers",
        "unavailable": "OFFLINE: web search was unavailable, so the sources are the host's installed packages "
        "(their READMEs and --help) and local documents",
    }[report.web]
    out += [f"{len(report.questions)} question(s), {len(report.sources)} source(s); {web}.", ""]
    out += ["## Summary", "", report.synthesis.summary if report.synthesis else "(no synthesis: see the notes)", ""]
    out += [f"## Checked on the host '{report.host.host}'", "", f"- installed: {report.host.summary()}"]
    for check in report.host_checks:
        if check.found_in:
            out.append(f"- `{check.item}` exists in `{check.found_in[0]}`")
        else:
            out.append(f"- `{check.item}` is NOT in the installed tools' --help: advice for another version?")
    out += (
        [f"- read on the host: {', '.join(f'`{command}`' for command in report.help_read)}"] if report.help_read else []
    )
    out += [f"- could not check: {problem}" for problem in report.host.problems]
    disagreements = list(report.synthesis.disagreements) if report.synthesis else []
    for result, numbers in zip(report.results, report.numbers, strict=True):
        if result.findings:
            disagreements += renumbered(result.findings, numbers).disagreements
    out += ["", "## Where sources disagree", ""]
    out += [f"- {line}" for line in disagreements] or ["- no disagreement was noted"]
    out += ["", "## Findings by question", ""]
    for result, numbers in zip(report.results, report.numbers, strict=True):
        out += [f"### {result.index}. {result.question}", ""]
        if result.findings is None:
            out += [f"No findings: {result.error}", ""]
            continue
        findings = renumbered(result.findings, numbers)
        out += [findings.summary, ""]
        for fact in findings.facts:
            cites = "".join(f"[{n}]" for n in fact.sources)
            host = " (checked on the host)" if any(report.sources[n - 1].origin == "host" for n in fact.sources) else ""
            out.append(f"- {fact.claim} {cites}{host}".rstrip())
        out.append("")
    if report.notes:
        out += ["## Notes", "", *(f"- {note}" for note in report.notes), ""]
    out += ["## Sources", ""]
    out += [f"{n}. [{s.title or s.url}]({s.url}) ({s.origin})" for n, s in enumerate(report.sources, start=1)]
    usage = report.usage
    out += ["", f"_{usage.get('calls', 0)} LLM calls, {usage.get('total_tokens', 0)} tokens._", ""]
    return "\n".join(out)


def renumbered_lines(lines: list[str], numbers: list[int]) -> list[str]:
    """[n] in a researcher's own numbering, rewritten to the report's."""

    def shared(match: re.Match[str]) -> str:
        local = int(match.group(1))
        return f"[{numbers[local - 1]}]" if 1 <= local <= len(numbers) else ""

    return [_CITATION.sub(shared, line) for line in lines]
