"""A stand-in web search backend: this machine has no internet, and a real engine's results change daily.

It answers from a function of the query, can fail its first tries, can hold every call at a barrier
(to prove that callers search at the same time), and remembers the queries it was asked.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from eyas.tools.web.search import SearchFailed, SearchHit


def hits_about(query: str) -> list[SearchHit]:
    """Two pages per query: one of its own, and one that every query finds (shared by researchers)."""
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")
    return [
        SearchHit(
            title=f"About {query}", url=f"https://docs.example/{slug}", snippet=f"{query}: see --speculative-config"
        ),
        SearchHit(
            title="EAGLE-3 overview", url="https://docs.example/eagle3", snippet="EAGLE-3 drafts from hidden states"
        ),
    ]


class StandInSearch:
    name = "stand-in"

    def __init__(
        self,
        answers: Callable[[str], list[SearchHit]] = hits_about,
        *,
        failures: int = 0,
        barrier: threading.Barrier | None = None,
        crash_on: str | None = None,
    ) -> None:
        self.answers = answers
        self.failures = failures
        self.barrier = barrier
        self.crash_on = crash_on
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, max_results: int) -> list[SearchHit]:
        with self._lock:
            self.calls.append(query)
            failing = len(self.calls) <= self.failures
        if self.crash_on and self.crash_on in query:
            raise RuntimeError(f"stand-in crash while searching {query!r}")
        if self.barrier is not None:
            self.barrier.wait()  # opens only when every caller is in flight at once
        if failing:
            raise SearchFailed(f"stand-in failure {len(self.calls)}")
        return self.answers(query)[:max_results]
