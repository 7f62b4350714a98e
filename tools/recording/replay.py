"""Replay: the run's own code runs again, and every crossing is answered from its transcript.

A live request is matched to the next recorded event of its task (order within a task is the order
its code ran in); the two must be equal as canonical JSON (compared by hash). The first mismatch stops
the replay with a `Divergence`: which recorded event, what was recorded, what the code asked now.
The report also carries the transcript's hash chain (chain.py): an altered or removed event is named there
even when it changes nothing the code asks, and such a replay is not ok.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from eyas.tools.recording.boundary import Boundary, BoundaryClock, BoundaryHost, BoundaryHttp, Fields, ReplayError
from eyas.tools.recording.chain import ChainCheck
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.task_scope import current_task
from eyas.tools.recording.transcript import Crossing, Event, build_event, redact_fields
from eyas.tools.recording.transcript_reader import Transcript, read_transcript


class DivergenceInfo(BaseModel):
    seq: int | None
    kind: str
    task: str
    after_seq: int | None
    recorded: dict[str, Any] | None
    live: dict[str, Any]
    diff: str


class Divergence(ReplayError):
    """The code asked something other than what the recorded run asked at this point of its task."""

    def __init__(self, info: DivergenceInfo, reason: str) -> None:
        self.info = info
        where = f"event #{info.seq}" if info.seq is not None else "the end of the recording"
        after = f", right after event #{info.after_seq}" if info.after_seq is not None else ""
        super().__init__(f"Replay diverged at {where} ({info.kind}, task {info.task}{after}): {reason}\n{info.diff}")


class CrashBoundary(ReplayError):
    """The code asks past the point where a crash cut the recorded run short (the next resume event): the replay
    of this try ends here, as the run did, and continues from the checkpoint the resume started from."""


class EventRef(BaseModel):
    seq: int
    kind: str
    task: str


class ReplayReport(BaseModel):
    transcript: str
    events_total: int
    events_replayed: int
    unconsumed: list[EventRef]
    divergence: DivergenceInfo | None
    warnings: list[str]
    chain: ChainCheck

    @property
    def ok(self) -> bool:
        """The code asked exactly what the recorded run asked, nothing was left over, and no event was altered or
        removed as far as the hash chain shows (an unchained transcript passes on the first two alone)."""
        return self.divergence is None and not self.unconsumed and self.chain.intact


class ReplaySession(Boundary):
    """Answers every crossing from a transcript, without network, host or LLM; thread-safe."""

    def __init__(self, transcript: Transcript, redactor: Redactor | None = None) -> None:
        self.transcript = transcript
        self.redactor = redactor or Redactor()
        self._queues: dict[str, deque[Event]] = {}
        for event in sorted(transcript.events, key=lambda event: event.seq):
            self._queues.setdefault(event.task, deque()).append(event)
        self._last: dict[str, int] = {}
        self._replayed = 0
        self._divergence: Divergence | None = None
        self._crash_at: int | None = None  # the seq of the next resume: no event from it on answers this try
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path, secrets: Iterable[str] = ()) -> ReplaySession:
        """Replay `path`; pass the secrets the recording redacted, so live requests are redacted alike."""
        return cls(read_transcript(path), Redactor(secrets))

    def cross(self, kind: str, request: Fields, perform: Callable[[], Fields]) -> Fields:
        event = self._match(kind, request)
        if isinstance(event, Crossing) and event.error is not None:
            raise event.error.rebuild()
        return event.response_fields()

    def note(self, kind: str, fields: Fields) -> None:
        self._match(kind, fields)

    def crash_at(self, seq: int | None) -> None:
        """Answer only events before `seq` (a resume event's) until moved on; None: every event."""
        with self._lock:
            self._crash_at = seq

    def host(self, name: str) -> ReplayHost:
        return ReplayHost(self, name)

    def http(self) -> ReplayHttp:
        return ReplayHttp(self)

    def clock(self) -> ReplayClock:
        return ReplayClock(self)

    def report(self) -> ReplayReport:
        with self._lock:
            left = [EventRef(seq=e.seq, kind=e.kind, task=e.task) for queue in self._queues.values() for e in queue]
            return ReplayReport(
                transcript=self.transcript.path,
                events_total=len(self.transcript.events),
                events_replayed=self._replayed,
                unconsumed=sorted(left, key=lambda ref: ref.seq),
                divergence=self._divergence.info if self._divergence else None,
                warnings=self.transcript.warnings,
                chain=self.transcript.chain,
            )

    def _match(self, kind: str, fields: Fields) -> Event:
        task = current_task()
        live = build_event(kind, redact_fields(self.redactor, fields), seq=-1, task=task, t=0.0)
        with self._lock:
            if self._divergence is not None:
                # Replay stopped at the first divergence; whatever the code does next is not comparable.
                raise self._divergence
            queue = self._queues.get(task)
            if self._crash_at is not None and (not queue or queue[0].seq >= self._crash_at):
                raise CrashBoundary(f"task {task} reached the end of its recording before the resume #{self._crash_at}")
            if queue and queue[0].request_hash == live.request_hash:
                recorded = queue.popleft()
                self._last[task] = recorded.seq
                self._replayed += 1
                return recorded
            self._divergence = self._diverged(task, queue[0] if queue else None, live)
            raise self._divergence

    def _diverged(self, task: str, recorded: Event | None, live: Event) -> Divergence:
        wanted = recorded.request_fields() if recorded else None
        asked = live.request_fields()
        if recorded is None:
            reason = f"the recording has no further event in task {task}, but the code asks this"
            if self.transcript.torn:
                reason += " (the transcript was cut by a crash: " + "; ".join(self.transcript.warnings) + ")"
        elif recorded.kind != live.kind:
            reason = f"the recording has a {recorded.kind} event here, the code asks a {live.kind}"
        else:
            changed = sorted(key for key in asked if asked[key] != recorded.request_fields().get(key))
            reason = f"the {live.kind} differs in {', '.join(changed)}"
        label = f"recorded #{recorded.seq}" if recorded else "recorded (nothing)"
        diff = "\n".join(
            difflib.unified_diff(_readable(wanted or {}), _readable(asked), label, "live", lineterm="", n=4)
        )
        info = DivergenceInfo(
            seq=recorded.seq if recorded else None,
            kind=(recorded or live).kind,
            task=task,
            after_seq=self._last.get(task),
            recorded=wanted,
            live=asked,
            diff=diff,
        )
        return Divergence(info, reason)


def _readable(value: Any, indent: int = 0) -> list[str]:
    """YAML-like lines, multi-line strings as blocks, so a diff points at the changed line of an output."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for key in sorted(value):
            item = value[key]
            if (isinstance(item, dict | list) and item) or (isinstance(item, str) and "\n" in item):
                lines += [f"{pad}{key}:", *_readable(item, indent + 1)]
            else:
                lines.append(f"{pad}{key}: {json.dumps(item, ensure_ascii=False)}")
        return lines
    if isinstance(value, list):
        return [line for item in value for line in _list_item(item, indent)]
    if isinstance(value, str) and "\n" in value:
        return [f"{pad}{line}" for line in value.splitlines()]
    return [f"{pad}{json.dumps(value, ensure_ascii=False)}"]


def _list_item(item: Any, indent: int) -> list[str]:
    nested = _readable(item, indent + 1)
    if len(nested) == 1 and not isinstance(item, dict):
        return [f"{'  ' * indent}- {nested[0].lstrip()}"]
    return [f"{'  ' * indent}-", *nested]


class ReplayHost(BoundaryHost):
    def __init__(self, session: ReplaySession, name: str) -> None:
        super().__init__(session, name, None)


class ReplayHttp(BoundaryHttp):
    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session, None)


class ReplayClock(BoundaryClock):
    """A virtual clock: reads return the recorded values and sleeps return at once."""

    def __init__(self, session: ReplaySession) -> None:
        super().__init__(session, None)
