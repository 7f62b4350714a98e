"""The boundary of a run: every crossing into the world (host, HTTP, clock, LLM, search, approval) goes
through one `Boundary`, which performs it live (this base), records it (recording.Recorder) or answers
it from a transcript (replay.ReplaySession). The adapters here put Host, HttpClient and Clock behind it.

For a new kind of crossing (the LLM client, web search, approvals) call
`boundary.cross(kind, request, perform)`: `request` is what is asked, as JSON fields of the kind's event
(transcript.py); `perform()` asks it for real and returns the response fields. On replay `perform` is
never called: the recorded response comes back, or the recorded error is raised again.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic_core import to_jsonable_python

from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import CommandResult, Host
from eyas.tools.hosts.http import HttpClient, HttpResponse
from eyas.tools.recording.task_scope import task_scope
from eyas.tools.recording.transcript import MAX_CONTENT, ErrorInfo, file_facts

T = TypeVar("T")
Fields = dict[str, Any]


class ReplayError(Exception):
    """A replay cannot go on. Not an EyasError, so code that reports EyasErrors as findings lets it through."""


class Boundary:
    """Performs every crossing live and records nothing (the base of the recording and replaying ones)."""

    def cross(self, kind: str, request: Fields, perform: Callable[[], Fields]) -> Fields:
        """Ask the world `request` of `kind`; returns the response fields."""
        return perform()

    def note(self, kind: str, fields: Fields) -> None:
        """A fact of eyas's own logic (kinds "node", "job_launch" from tools/jobs/executor.py's launch_noted):
        recorded, and checked on replay."""

    def node(self, name: str, fn: Callable[..., T], *args: Any, task: str | None = None, **kwargs: Any) -> T:
        """Run one graph node as task `task` (default: its name), noting its start and its output or error.
        Parallel branches of the same node need distinct `task` names (e.g. the topic of a researcher)."""
        with task_scope(task or name):
            self.note("node", {"node": name, "phase": "start"})
            try:
                output = fn(*args, **kwargs)
            except ReplayError:
                raise  # the replay stopped; the node did not fail
            except Exception as exc:
                self.note("node", {"node": name, "phase": "end", "error": ErrorInfo.of(exc).model_dump()})
                raise
            self.note("node", {"node": name, "phase": "end", "output": to_jsonable_python(output, fallback=repr)})
            return output


def _live(inner: T | None) -> T:
    if inner is None:
        raise ReplayError("A replaying adapter was asked to reach the world; only the boundary may answer it.")
    return inner


class BoundaryHost(Host):
    """A Host whose every command and file operation crosses `boundary`; `inner` does the real work."""

    def __init__(self, boundary: Boundary, name: str, inner: Host | None, max_content: int = MAX_CONTENT) -> None:
        self.name = name
        self._boundary = boundary
        self._inner = inner
        self._max_content = max_content

    def run(self, command: str, *, timeout: float = 60.0) -> CommandResult:
        def perform() -> Fields:
            result = _live(self._inner).run(command, timeout=timeout)
            return {"rc": result.rc, "stdout": result.stdout, "stderr": result.stderr, "duration_s": result.duration_s}

        request = {"host": self.name, "command": command, "timeout": timeout}
        answer = self._boundary.cross("command", request, perform)
        return CommandResult(self.name, command, answer["rc"], answer["stdout"], answer["stderr"], answer["duration_s"])

    def read_bytes(self, path: str) -> bytes:
        live: list[bytes] = []

        def perform() -> Fields:
            live.append(_live(self._inner).read_bytes(path))
            return file_facts(live[0], self._max_content)

        answer = self._boundary.cross("file_read", {"host": self.name, "path": path}, perform)
        if live:
            return live[0]
        return _recorded_content(answer, path)

    def write_bytes(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        def perform() -> Fields:
            _live(self._inner).write_bytes(path, data, mode=mode)
            return {}

        # A file only its owner may read carries secrets: neither its bytes nor their digest are recorded.
        facts = {"size": len(data), "secret": True} if mode & 0o077 == 0 else file_facts(data, self._max_content)
        self._boundary.cross("file_write", {"host": self.name, "path": path, "mode": mode, **facts}, perform)

    def exists(self, path: str) -> bool:
        def perform() -> Fields:
            return {"exists": _live(self._inner).exists(path)}

        return bool(self._boundary.cross("file_exists", {"host": self.name, "path": path}, perform)["exists"])

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()


def _recorded_content(answer: Fields, path: str) -> bytes:
    if answer["content"] is None:
        raise ReplayError(
            f"The transcript holds only the size ({answer['size']} bytes) and sha256 of {path}, not its content "
            "(too large, or binary with a secret in it), so replay cannot hand it to the code."
        )
    if answer["encoding"] == "base64":
        return base64.b64decode(answer["content"])
    return str(answer["content"]).encode("utf-8")


class BoundaryHttp(HttpClient):
    """An HttpClient whose every request and TCP probe crosses `boundary`; `inner` does the real work."""

    def __init__(self, boundary: Boundary, inner: HttpClient | None) -> None:
        super().__init__()
        self._boundary = boundary
        self._inner = inner

    def request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> HttpResponse:
        def perform() -> Fields:
            response = _live(self._inner).request(method, url, json_body=json_body, headers=headers, timeout=timeout)
            return {"status": response.status, "body": response.body, "duration_s": response.duration_s}

        request = {"method": method, "url": url, "json_body": json_body, "headers": headers, "timeout": timeout}
        answer = self._boundary.cross("http", request, perform)
        return HttpResponse(method, url, answer["status"], answer["body"], answer["duration_s"])

    def tcp_connect(self, url: str, *, timeout: float = 5.0) -> float:
        def perform() -> Fields:
            return {"duration_s": _live(self._inner).tcp_connect(url, timeout=timeout)}

        return float(self._boundary.cross("tcp", {"url": url, "timeout": timeout}, perform)["duration_s"])


class BoundaryClock(Clock):
    """A Clock whose every read and sleep crosses `boundary`; `inner` is the real clock."""

    def __init__(self, boundary: Boundary, inner: Clock | None = SYSTEM_CLOCK) -> None:
        self._boundary = boundary
        self._inner = inner

    def now(self) -> float:
        return self._read("now", lambda clock: clock.now())

    def monotonic(self) -> float:
        return self._read("monotonic", lambda clock: clock.monotonic())

    def _read(self, op: str, read: Callable[[Clock], float]) -> float:
        def perform() -> Fields:
            # A read takes no time worth a field in every one of the many clock events.
            return {"value": read(_live(self._inner)), "duration_s": None}

        return float(self._boundary.cross("clock", {"op": op}, perform)["value"])

    def sleep(self, seconds: float) -> None:
        def perform() -> Fields:
            _live(self._inner).sleep(seconds)
            return {}

        self._boundary.cross("clock", {"op": "sleep", "seconds": seconds}, perform)
