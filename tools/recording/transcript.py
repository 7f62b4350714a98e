"""The transcript of a run: one JSON line per boundary crossing, append-only, readable after a crash.

Every event has `v` (schema version), `seq` (position in the file), `kind`, `task` (the branch of the
run that caused it, see task_scope.py) and `t` (wall time when it completed). A crossing's fields are
split into the request (what eyas asked: compared on replay) and the response (what the world answered:
handed back on replay). Notes (node start/end, job launches) are all request: replay only checks them.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from eyas.tools import errors
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpError
from eyas.tools.planning.sizes import SizeValue
from eyas.tools.private_files import open_private
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.task_scope import current_task

SCHEMA_VERSION: Final = 1
_BASE_FIELDS = frozenset({"v", "seq", "kind", "task", "t"})


class TranscriptError(EyasError):
    """A transcript that cannot be read as one (not a torn last line: that is skipped)."""


def canonical(value: Any) -> str:
    """One spelling per value, so equal requests hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:16]


# -- errors: recorded by type name and message, re-raised as the same type on replay ---------------------

_ERROR_TYPES: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == errors.__name__
}
_ERROR_TYPES[HttpError.__name__] = HttpError


def register_error_type(cls: type[Exception]) -> type[Exception]:
    """Make replay re-raise `cls` (constructed from its message alone); usable as a class decorator."""
    _ERROR_TYPES[cls.__name__] = cls
    return cls


class RecordedError(Exception):
    """Replay of an error whose type eyas cannot rebuild (not registered with register_error_type)."""


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> ErrorInfo:
        return cls(type=type(exc).__name__, message=str(exc))

    def rebuild(self) -> Exception:
        cls = _ERROR_TYPES.get(self.type) or getattr(builtins, self.type, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            return cls(self.message)
        return RecordedError(f"{self.type}: {self.message}")


# -- events -----------------------------------------------------------------------------------------------


class Event(BaseModel):
    # Finite numbers only: a recorded NaN or infinity in a time would break every reader of it.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    REQUEST: ClassVar[tuple[str, ...]] = ()

    v: Literal[1] = SCHEMA_VERSION
    seq: int
    kind: str
    task: str
    t: float

    def request_fields(self) -> dict[str, Any]:
        """What eyas asked, as JSON: a live request matches this event when these are equal."""
        return {"kind": self.kind, **self.model_dump(mode="json", include=set(self.REQUEST))}

    def response_fields(self) -> dict[str, Any]:
        """What the world answered, as JSON (without the error, which replay raises instead)."""
        return self.model_dump(mode="json", exclude={*_BASE_FIELDS, *self.REQUEST, "error"})

    @property
    def request_hash(self) -> str:
        return digest(self.request_fields())


class Crossing(Event):
    """A call into the world: a response, or the error it raised; how long it took."""

    error: ErrorInfo | None = None
    duration_s: float | None = None


class CommandEvent(Crossing):
    REQUEST = ("host", "command", "timeout")
    kind: Literal["command"] = "command"
    host: str
    command: str
    timeout: float
    rc: int | None = None
    stdout: str = ""
    stderr: str = ""


MAX_CONTENT = 64 * 1024


def file_facts(data: bytes, max_content: int = MAX_CONTENT) -> dict[str, Any]:
    """Size and sha256 of file bytes, and the bytes themselves when small (text as text, else base64)."""
    facts: dict[str, Any] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) <= max_content:
        try:
            facts.update(content=data.decode("utf-8"), encoding="utf-8")
        except UnicodeDecodeError:
            facts.update(content=base64.b64encode(data).decode(), encoding="base64")
    return facts


class FileReadEvent(Crossing):
    REQUEST = ("host", "path")
    kind: Literal["file_read"] = "file_read"
    host: str
    path: str
    size: int | None = None
    sha256: str | None = None
    content: str | None = Field(None, description="the bytes when small: utf-8 text, or base64 (see encoding)")
    encoding: Literal["utf-8", "base64"] | None = None


class FileWriteEvent(Crossing):
    REQUEST = ("host", "path", "mode", "size", "sha256", "content", "encoding", "secret")
    kind: Literal["file_write"] = "file_write"
    host: str
    path: str
    mode: int
    size: int
    sha256: str | None = Field(None, description="None for a secret file: a digest would let a weak key be guessed")
    content: str | None = None
    encoding: Literal["utf-8", "base64"] | None = None
    secret: bool = Field(False, description="written for its owner only (e.g. a job's secrets.env): size alone kept")


class FileExistsEvent(Crossing):
    REQUEST = ("host", "path")
    kind: Literal["file_exists"] = "file_exists"
    host: str
    path: str
    exists: bool | None = None


class HttpEvent(Crossing):
    REQUEST = ("method", "url", "json_body", "headers", "timeout")
    kind: Literal["http"] = "http"
    method: str
    url: str
    json_body: Any = None
    headers: dict[str, str] | None = None
    timeout: float
    status: int | None = None
    body: str | None = None


class TcpEvent(Crossing):
    """A TCP connect probe; duration_s is the connect time eyas measured."""

    REQUEST = ("url", "timeout")
    kind: Literal["tcp"] = "tcp"
    url: str
    timeout: float


class ClockEvent(Crossing):
    REQUEST = ("op", "seconds")
    kind: Literal["clock"] = "clock"
    op: Literal["now", "monotonic", "sleep"]
    seconds: float | None = None
    value: float | None = None


class LlmEvent(Crossing):
    """`request` is the whole call as JSON (model, messages, tools, sampling); `response` the answer as JSON."""

    REQUEST = ("request",)
    kind: Literal["llm"] = "llm"
    request: dict[str, Any]
    response: Any = None


class SearchEvent(Crossing):
    REQUEST = ("query", "options")
    kind: Literal["search"] = "search"
    query: str
    options: dict[str, Any] = Field(default_factory=dict)
    results: list[Any] = Field(default_factory=list)


class ApprovalEvent(Crossing):
    """The plan shown at a gate, and the decision: by a person, or by the autonomous policy."""

    REQUEST = ("gate", "plan")
    kind: Literal["approval"] = "approval"
    gate: str
    plan: Any = None
    decision: str | None = None
    reason: str = ""
    who: str = ""
    sizes: dict[str, SizeValue] | None = None  # an "edit" answer's new sizes


class RunEvent(Event):
    """How the run was started (its config, policy, sizes and first input), so a replay can start it again."""

    REQUEST = ("meta", "config", "input")
    kind: Literal["run"] = "run"
    meta: dict[str, Any]
    config: dict[str, Any]
    input: dict[str, Any] | None = None


class NodeEvent(Event):
    REQUEST = ("node", "phase", "output", "error")
    kind: Literal["node"] = "node"
    node: str
    phase: Literal["start", "end"]
    output: Any = None
    error: ErrorInfo | None = None


class JobLaunchEvent(Event):
    REQUEST = ("host", "job_id", "argv", "env", "cwd", "state")
    kind: Literal["job_launch"] = "job_launch"
    host: str
    job_id: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    state: Any = None


AnyEvent = Annotated[
    RunEvent
    | CommandEvent
    | FileReadEvent
    | FileWriteEvent
    | FileExistsEvent
    | HttpEvent
    | TcpEvent
    | ClockEvent
    | LlmEvent
    | SearchEvent
    | ApprovalEvent
    | NodeEvent
    | JobLaunchEvent,
    Field(discriminator="kind"),
]
EVENT_TYPES: dict[str, type[Event]] = {cls.model_fields["kind"].default: cls for cls in get_args(get_args(AnyEvent)[0])}
_EVENT = TypeAdapter(AnyEvent)


def build_event(kind: str, fields: dict[str, Any], *, seq: int, task: str, t: float) -> Event:
    """Validate an event of `kind`; raises ValueError naming the kind when a field is wrong."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"Unknown transcript event kind {kind!r}; the kinds are {', '.join(EVENT_TYPES)}")
    return cls.model_validate({**fields, "seq": seq, "task": task, "t": t, "kind": kind})


def redact_fields(redactor: Redactor, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as they may be written: secrets replaced, and binary content that hides one dropped."""
    clean = redactor.value(fields)
    if clean.get("encoding") == "base64" and redactor.finds_secret(
        base64.b64decode(clean["content"]).decode("latin-1")
    ):
        clean.update(content=None, encoding=None)
    return clean


# -- writing ----------------------------------------------------------------------------------------------


class TranscriptWriter:
    """Appends events with a flush and fsync each, from any thread; continues an existing transcript."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_transcript(path) if path.exists() else None
        self._next_seq = max((event.seq for event in existing.events), default=-1) + 1 if existing else 0
        self._file = open_private(path, "ab")
        if self._file.tell() > 0 and not _ends_with_newline(path):
            # A torn last line from a crash: end it, so the next event starts on its own line.
            self._write_line(b"\n")

    def write(self, kind: str, fields: dict[str, Any]) -> Event:
        """Redact, validate and append one event of the current task."""
        clean = redact_fields(self.redactor, fields)
        with self._lock:
            event = build_event(kind, clean, seq=self._next_seq, task=current_task(), t=SYSTEM_CLOCK.now())
            self._write_line(event.model_dump_json(exclude_none=True).encode() + b"\n")
            self._next_seq += 1
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _write_line(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


# -- reading ----------------------------------------------------------------------------------------------


class SkippedLine(BaseModel):
    """An event this eyas cannot read (of another kind or schema version), kept so `show` marks it in place."""

    line: int
    before: int = Field(description="how many events precede it in the file")
    kind: str
    problem: str


class Transcript(BaseModel):
    path: str
    events: list[AnyEvent]
    warnings: list[str] = Field(default_factory=list)
    torn_lines: list[int] = Field(default_factory=list, description="1-based numbers of lines cut by a crash")
    skipped: list[SkippedLine] = Field(default_factory=list)

    @property
    def torn(self) -> bool:
        return bool(self.torn_lines)


class _BadLine(Exception):
    """What is wrong with one line; `unknown` when it is a well-formed event this eyas does not know."""

    def __init__(self, problem: str, *, unknown: str | None = None) -> None:
        super().__init__(problem)
        self.unknown = unknown


CORRUPT_FIX = "Restore the file from a copy, or delete that line to read the rest (a replay then diverges there)."
OTHER_VERSION_FIX = "Read it with the eyas that recorded it; `eyas show` shows the rest and marks it."


def read_transcript(path: Path, *, keep_unknown: bool = False) -> Transcript:
    """Every complete event. A line cut short by a crash (at the end, or before a resumed run's events) is skipped
    with a warning; any other bad line is refused with its number and what is wrong. With `keep_unknown`, an event
    of a kind or schema version this eyas does not know is kept in `skipped` instead (for `show`)."""
    lines = _read_lines(path)
    events: list[AnyEvent] = []
    torn: list[int] = []
    skipped: list[SkippedLine] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if _cut_short(raw):
            torn.append(number)
            continue
        try:
            events.append(_event(raw))
        except _BadLine as bad:
            if keep_unknown and bad.unknown is not None:
                skipped.append(SkippedLine(line=number, before=len(events), kind=bad.unknown, problem=str(bad)))
                continue
            fix = OTHER_VERSION_FIX if bad.unknown is not None else CORRUPT_FIX
            raise TranscriptError(f"{path}: line {number} {bad}. {fix}") from None
    warnings = [
        f"{path}: line {number} is incomplete ({len(lines[number - 1])} bytes, "
        f"{'the end of the file' if number >= len(lines) - 1 else 'followed by a resumed run'}): "
        "the run was cut short while writing it; it is skipped"
        for number in torn
    ]
    return Transcript(path=str(path), events=events, warnings=warnings, torn_lines=torn, skipped=skipped)


def _read_lines(path: Path) -> list[bytes]:
    try:
        return path.read_bytes().split(b"\n")
    except FileNotFoundError:
        raise TranscriptError(f"No transcript at {path}; runs keep theirs at runs/<run_id>/transcript.jsonl.") from None
    except IsADirectoryError:
        raise TranscriptError(
            f"{path} is a folder, not a transcript; pass the transcript.jsonl in it (runs/<run_id>/transcript.jsonl)."
        ) from None
    except OSError as exc:
        raise TranscriptError(f"Cannot read the transcript {path}: {exc.strerror}. Pass a readable file.") from None


# What a line cut mid-write ends in, where the decoder stops: a number, a keyword or an escape left unfinished.
_PARTIAL_TOKEN = re.compile(r"[-+0-9.eE]*|[a-z]{1,4}|\\(u[0-9a-fA-F]{0,3})?")


def _cut_short(raw: bytes) -> bool:
    """Whether a line is the start of an event a crash cut off: its only fault is its missing end."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":
            return False
        text = raw[: exc.start].decode()
    if not text.startswith("{"):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        rest = text[exc.pos :]
        unfinished_escape = exc.msg.startswith("Invalid \\uXXXX") and len(rest) <= 6
        return exc.msg.startswith("Unterminated string") or unfinished_escape or bool(_PARTIAL_TOKEN.fullmatch(rest))
    except (ValueError, RecursionError):
        return False
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which is not a JSON number (eyas writes only finite numbers)")


def _event(raw: bytes) -> AnyEvent:
    """One line as an event, or _BadLine saying what is wrong with it."""
    try:
        data = json.loads(raw.decode(), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise _BadLine(f"is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _BadLine(f"is not JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise _BadLine("nests JSON deeper than Python reads") from None
    except ValueError as exc:
        raise _BadLine(str(exc)) from None
    if not isinstance(data, dict):
        found = "null" if data is None else type(data).__name__
        raise _BadLine(f"is {found}, not an event (a JSON object with v, seq, kind, task and t)")
    if data.get("v") != SCHEMA_VERSION:
        version = f"schema version {data['v']!r}" if "v" in data else "no schema version (v)"
        other_version = str(data.get("kind")) if "v" in data else None
        raise _BadLine(f"has {version}; this eyas reads version {SCHEMA_VERSION}", unknown=other_version)
    kind = data.get("kind")
    if kind not in EVENT_TYPES:
        raise _BadLine(
            f"is an event of kind {kind!r}, which this eyas does not know (it knows {', '.join(EVENT_TYPES)})",
            unknown=str(kind),
        )
    try:
        return _EVENT.validate_python(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise _BadLine(f"is not a valid event ({where}: {problem['msg']})") from None
    except RecursionError:
        raise _BadLine("nests JSON deeper than Python reads") from None
