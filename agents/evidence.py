"""A researcher's sources: web search that degrades to documents installed on the host, fetched pages,
and the host's own --help, numbered as they are found."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from eyas.agents.research_report import Source
from eyas.tools.checks.host_facts import HostFacts, search_docs
from eyas.tools.errors import EyasError
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.web.search import Origin, SearchHit, SearchUnavailable, WebSearch
from eyas.tools.web.webpage import fetch_page
from eyas.tools.workloads.package_docs import terms

_OPTION = re.compile(r"^\s{0,8}-{1,2}[A-Za-z]")
_NUMBER = re.compile(r"^\[?(\d+)\]?$")


@dataclass(frozen=True)
class DocSearch:
    """Documents searched when the web is down: a host's installed packages, and/or files on it."""

    host: Host
    python: str
    script: str
    paths: list[str] = field(default_factory=list)
    packages: bool = True
    origin: Origin = "host"

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        return search_docs(
            self.host,
            self.python,
            query,
            script=self.script,
            max_results=max_results,
            paths=self.paths,
            packages=self.packages,
            origin=self.origin,
        )


def help_sources(facts: HostFacts, question: str, max_chars: int) -> list[Source]:
    """The installed versions, and the --help entries (flags and their descriptions) that the question's
    words point at, rarest words weighing most: the host's own answer to "which flag does that"."""
    sources = [
        Source(
            url=f"host://{facts.host}/versions",
            title=f"versions installed on '{facts.host}'",
            origin="host",
            excerpt=facts.summary(),
        )
    ]
    words = set(terms(question))
    words |= {word.replace("-", "") for word in words}
    entries = [(command, entry) for command, text in facts.help.items() for entry in _entries(text)]
    if not entries or not words:
        return sources
    lowered = [entry.lower() for _, entry in entries]
    weight = {word: math.log(len(entries) / (1 + sum(word in text for text in lowered))) for word in words}
    scored = sorted(
        ((sum(weight[word] for word in words if word in text), index) for index, text in enumerate(lowered)),
        reverse=True,
    )
    chosen: dict[str, list[str]] = {}
    used = 0
    for score, index in scored:
        command, entry = entries[index]
        if score <= 0 or used + len(entry) > max_chars:
            break
        chosen.setdefault(command, []).append(entry)
        used += len(entry)
    for command, picked in chosen.items():
        sources.append(
            Source(
                url=f"host://{facts.host}/help/{'/'.join(command.split())}",
                title=f"`{command}` on '{facts.host}'",
                origin="host",
                excerpt="\n".join(picked),
            )
        )
    return sources


def _entries(text: str) -> list[str]:
    """A help text cut into one entry per option (its flag line and description lines)."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if _OPTION.match(line) or not entries:
            entries.append([])
        entries[-1].append(line.strip())
    return [" ".join(entry) for entry in entries if entry and entry[0].startswith("-")]


class Evidence:
    """The sources one researcher found, in the order found (its numbers are 1-based positions)."""

    def __init__(
        self, search: WebSearch, http: HttpClient, docs: list[DocSearch], *, per_search: int, page_chars: int
    ) -> None:
        self.sources: list[Source] = []
        self._search = search
        self._http = http
        self._docs = docs
        self._per_search = per_search
        self._page_chars = page_chars
        self.web_worked = False
        self.web_failure: str | None = None

    def add(self, source: Source) -> int:
        for number, known in enumerate(self.sources, start=1):
            if known.url == source.url:
                return number
        self.sources.append(source)
        return len(self.sources)

    def search(self, query: str) -> str:
        """Search the web, or the installed documentation when the web is down; the hits as a listing."""
        note = ""
        try:
            hits = self._search.search(query, self._per_search)
            self.web_worked = True
        except SearchUnavailable as exc:
            self.web_failure = str(exc)
            hits = self._search_docs(query)
            note = "The web is unavailable; these passages come from documentation installed on the host.\n"
        numbers = [
            self.add(Source(url=hit.url, title=hit.title, origin=hit.origin, excerpt=hit.snippet)) for hit in hits
        ]
        return note + (self.listing(numbers) if numbers else f"No results for {query!r}.")

    def fetch(self, reference: str) -> str:
        """Read a web source in full (by number or URL); its text becomes the source's excerpt."""
        match = _NUMBER.match(reference.strip())
        if match:
            number = int(match.group(1))
            if not 1 <= number <= len(self.sources):
                return f"There is no source {number}; the sources are numbered 1 to {len(self.sources)}."
            source = self.sources[number - 1]
        else:
            number, source = 0, Source(url=reference.strip(), title="", origin="page", excerpt="")
        if source.origin in ("host", "local"):
            return f"Source {number} is installed documentation, shown in full already."
        page = fetch_page(self._http, source.url, max_chars=self._page_chars)
        if page.error:
            return f"Could not read {source.url}: {page.error}"
        read = source.model_copy(update={"title": source.title or page.title, "excerpt": page.text})
        if number:
            self.sources[number - 1] = read
        else:
            number = self.add(read)
        return f"[{number}] {read.title or read.url}\n{page.text[:1500]}"

    def listing(self, numbers: list[int] | None = None, chars: int = 240) -> str:
        chosen = numbers if numbers is not None else list(range(1, len(self.sources) + 1))
        lines = []
        for number in chosen:
            source = self.sources[number - 1]
            excerpt = " ".join(source.excerpt.split())[:chars]
            lines.append(f"[{number}] ({source.origin}) {source.title} <{source.url}>\n{excerpt}")
        return "\n".join(lines)

    @property
    def web(self) -> Literal["ok", "unavailable"]:
        return "unavailable" if self.web_failure and not self.web_worked else "ok"

    def _search_docs(self, query: str) -> list[SearchHit]:
        hits: list[SearchHit] = []
        for docs in self._docs:
            try:
                hits += docs.search(query, self._per_search)
            except EyasError as exc:
                self.web_failure = f"{self.web_failure}; and {exc}"
        return hits
