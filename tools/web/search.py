"""Web search for the research agents: ddgs behind a process-wide rate limiter, a per-query cache and backoff
(`tools/retry.py`'s policy).

Every search crosses the run's `Boundary` as one "search" event. The cache, the limiter, the retries and
the "web is down" breaker all live inside the crossing, so a replay answers each search from the
transcript no matter which parallel researcher happened to fill the cache. When the web cannot be
reached, `search` raises SearchUnavailable and the caller degrades to host-grounded and local sources.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal, Protocol

from ddgs import DDGS
from ddgs.exceptions import DDGSException
from pydantic import BaseModel

from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.recording.boundary import Boundary, Fields
from eyas.tools.recording.transcript import canonical, register_error_type
from eyas.tools.retry import Backoff, GaveUp, after_tries, retry

Origin = Literal["web", "page", "host", "local"]


class SearchHit(BaseModel):
    title: str
    url: str
    snippet: str
    origin: Origin = "web"


class SearchFailed(Exception):
    """One try of a backend failed; worth retrying."""


@register_error_type
class SearchUnavailable(EyasError):
    """Web search cannot be reached now (offline, blocked or rate-limited past the retries)."""


class SearchBackend(Protocol):
    name: str

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        """Hits for `query`; raises SearchFailed when this try failed."""
        ...


class DdgsBackend:
    """ddgs's metasearch. It is synchronous and can hang on a dead network, so each call runs in a daemon
    thread that is abandoned after `timeout_s` (ddgs's own timeout is per engine)."""

    name = "ddgs"

    def __init__(self, timeout_s: float = 10.0, backend: str = "auto") -> None:
        self.timeout_s = timeout_s
        self.backend = backend

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        outcome: list[list[dict[str, str]] | BaseException] = []

        def call() -> None:
            try:
                outcome.append(
                    DDGS(timeout=max(1, int(self.timeout_s))).text(query, max_results=max_results, backend=self.backend)
                )
            except Exception as exc:
                outcome.append(exc)

        worker = threading.Thread(target=call, name="ddgs", daemon=True)
        worker.start()
        worker.join(self.timeout_s * 2)
        if not outcome:
            raise SearchFailed(f"ddgs gave no answer within {self.timeout_s * 2:.0f} s")
        result = outcome[0]
        if isinstance(result, DDGSException):
            if str(result) == "No results found.":
                return []
            raise SearchFailed(f"ddgs: {type(result).__name__}: {result}")
        if isinstance(result, BaseException):
            raise result
        return [
            SearchHit(title=item.get("title", ""), url=item.get("href", ""), snippet=item.get("body", ""))
            for item in result
            if item.get("href")
        ]


class RateLimiter:
    """At most one call per `interval_s`, across every thread that shares it."""

    def __init__(self, interval_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> None:
        with self._lock:
            now = self.clock.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval_s
        if slot > now:
            self.clock.sleep(slot - now)


class SearchCache:
    """Results by query; concurrent searches for one query wait for a single backend call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[str, list[SearchHit]] = {}
        self._key_locks: dict[str, threading.Lock] = {}

    def get_or_fetch(self, key: str, fetch: Callable[[], list[SearchHit]]) -> list[SearchHit]:
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._results:
                self._results[key] = fetch()
            return self._results[key]


# Shared by every WebSearch of the process: the search engines see one client, however many researchers.
PROCESS_LIMITER = RateLimiter(interval_s=2.0)
PROCESS_CACHE = SearchCache()


class WebSearch:
    def __init__(
        self,
        boundary: Boundary | None = None,
        backend: SearchBackend | None = None,
        *,
        limiter: RateLimiter = PROCESS_LIMITER,
        cache: SearchCache = PROCESS_CACHE,
        clock: Clock = SYSTEM_CLOCK,
        attempts: int = 3,
        backoff_s: float = 2.0,
        down_for_s: float = 600.0,
    ) -> None:
        """`clock` paces backoff inside the crossing: pass a live clock, never a recording one."""
        self.boundary = boundary or Boundary()
        self.backend = backend or DdgsBackend()
        self.limiter = limiter
        self.cache = cache
        self.clock = clock
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.down_for_s = down_for_s
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down_reason = ""

    def search(self, query: str, max_results: int = 5) -> list[SearchHit]:
        """Hits for `query`; raises SearchUnavailable when the web cannot be searched."""
        query = " ".join(query.split())
        request = {"query": query, "options": {"max_results": max_results, "backend": self.backend.name}}

        def perform() -> Fields:
            key = canonical([self.backend.name, query.lower(), max_results])
            hits = self.cache.get_or_fetch(key, lambda: self._fetch(query, max_results))
            return {"results": [hit.model_dump() for hit in hits]}

        answer = self.boundary.cross("search", request, perform)
        return [SearchHit.model_validate(hit) for hit in answer["results"]]

    def _fetch(self, query: str, max_results: int) -> list[SearchHit]:
        with self._lock:
            if self.clock.monotonic() < self._down_until:
                raise SearchUnavailable(
                    f"Web search is unavailable (not retried for {self.down_for_s:.0f} s after: {self._down_reason})."
                )

        def one_try() -> list[SearchHit]:
            self.limiter.acquire()
            return self.backend.search(query, max_results)

        try:
            return retry(
                one_try, on=(SearchFailed,), wait_s=lambda failures: Backoff(self.backoff_s).wait_s(failures.tries),
                give_up=after_tries(self.attempts), sleep=self.clock.sleep,
            )  # fmt: skip
        except GaveUp as out:
            last = str(out.failures.last)
        with self._lock:
            self._down_until = self.clock.monotonic() + self.down_for_s
            self._down_reason = last
        raise SearchUnavailable(
            f"Web search failed {self.attempts} times for {query!r} (last: {last}); without internet eyas "
            "researches from the host's installed packages and local documents instead."
        )
