"""A job's progress as plain lines, for a terminal that is not one (`make demo > log`, CI): there a progress bar shows
only its final state, so the run says each job's progress as a line instead, "run.generate: 40/100, 12.3 tokens/s,
2 min left": its first, one at each tenth of the way, one at most every EVERY_S seconds between them while something
changed, and its end; never the same line twice."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eyas.agents.faces.progress_text import count_text, number, time_left_text

EVERY_S = 60.0
TENTHS = 10


@dataclass
class _Said:
    text: str
    at: float
    tenth: int | None
    finished: bool


@dataclass(frozen=True)
class _Start:
    at: float
    done: float


class ProgressLines:
    """Says each job's progress through `say` when it is news (see the module's docstring)."""

    def __init__(
        self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic, every_s: float = EVERY_S
    ) -> None:
        self._say = say
        self._clock = clock
        self._every_s = every_s
        self._said: dict[str, _Said] = {}
        self._start: dict[str, _Start] = {}

    def update(self, name: str, seen: Mapping[str, Any], figures: str, *, finished: bool) -> None:
        """The job `name` as its progress lines so far tell it (`seen`), with `figures` in words beside its count."""
        now = self._clock()
        done, total = number(seen.get("done")), number(seen.get("total"))
        start = self._start.setdefault(name, _Start(now, done or 0.0))
        tenth = int(TENTHS * done / total) if done is not None and total else None
        left = None if finished else _time_left(seen, start, now, done, total)
        body = ", ".join(part for part in (count_text(seen), figures, left) if part)
        text = f"{name}: {body}" if body else name
        last = self._said.get(name)
        if last is not None and (text == last.text or last.finished):
            return
        news = last is None or finished or (tenth is not None and tenth != last.tenth) or now - last.at >= self._every_s
        if news:
            self._said[name] = _Said(text, now, tenth, finished)
            self._say(text)


def _time_left(
    seen: Mapping[str, Any], start: _Start, now: float, done: float | None, total: float | None
) -> str | None:
    """The job's own estimate (`eta_s`), else the pace since it was first seen; None before any pace is known."""
    eta = number(seen.get("eta_s"))
    if eta is None and done is not None and total and done > start.done and now > start.at:
        eta = (total - done) * (now - start.at) / (done - start.done)
    return None if eta is None else time_left_text(eta)
