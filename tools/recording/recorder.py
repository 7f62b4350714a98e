"""Recording: the run works against the real world and every crossing lands in the transcript, redacted.

Wrap the real adapters once, where a run starts (`recorder.host(LocalHost())`, `recorder.http()`,
`recorder.clock()`), and hand the wrapped ones to the run's code. The real adapters keep the plain system
clock: their own timing is part of the crossing, and a replay never calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.recording.boundary import Boundary, BoundaryClock, BoundaryHost, BoundaryHttp, Fields
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.transcript import MAX_CONTENT, ErrorInfo
from eyas.tools.recording.transcript_writer import TranscriptWriter


class Recorder(Boundary):
    """Performs each crossing and appends it, with its response or its error, to a transcript."""

    def __init__(self, writer: TranscriptWriter) -> None:
        self.writer = writer

    @classmethod
    def open(cls, path: Path, secrets: Iterable[str] = ()) -> Recorder:
        """Record into `path` (appending when it exists, e.g. a resumed run); `secrets` are redacted."""
        return cls(TranscriptWriter(path, Redactor(secrets)))

    def cross(self, kind: str, request: Fields, perform: Callable[[], Fields]) -> Fields:
        # The recorder's own timing of the crossing, not a run's clock read: it never enters the run's logic.
        started = SYSTEM_CLOCK.monotonic()
        try:
            response = perform()
        except Exception as exc:
            elapsed = round(SYSTEM_CLOCK.monotonic() - started, 6)
            self.writer.write(kind, {**request, "error": ErrorInfo.of(exc).model_dump(), "duration_s": elapsed})
            raise
        elapsed = round(SYSTEM_CLOCK.monotonic() - started, 6)
        self.writer.write(kind, {"duration_s": elapsed, **request, **response})
        return response

    def note(self, kind: str, fields: Fields) -> None:
        self.writer.write(kind, fields)

    def host(self, inner: Host) -> RecordingHost:
        return RecordingHost(inner, self)

    def http(self, inner: HttpClient | None = None) -> RecordingHttp:
        return RecordingHttp(inner or HttpClient(), self)

    def clock(self, inner: Clock = SYSTEM_CLOCK) -> RecordingClock:
        return RecordingClock(inner, self)

    def close(self) -> None:
        self.writer.close()


class RecordingHost(BoundaryHost):
    def __init__(self, inner: Host, recorder: Recorder, max_content: int = MAX_CONTENT) -> None:
        super().__init__(recorder, inner.name, inner, max_content)


class RecordingHttp(BoundaryHttp):
    def __init__(self, inner: HttpClient, recorder: Recorder) -> None:
        super().__init__(recorder, inner)


class RecordingClock(BoundaryClock):
    def __init__(self, inner: Clock, recorder: Recorder) -> None:
        super().__init__(recorder, inner)
