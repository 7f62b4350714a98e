"""The transcript of a run: one JSON line per boundary crossing, append-only, readable after a crash.

Every event has `v` (schema version), `seq` (position in the file), `kind`, `task` (the branch of the
run that caused it, see task_scope.py), `t` (wall time when it completed) and `prev` (the hash of the
line before it, see chain.py; absent in transcripts recorded before the chain). A crossing's fields are
split into the request (what eyas asked: compared on replay) and the response (what the world answered:
handed back on replay). Notes (node start/end, job launches) are all request: replay only checks them.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from eyas.tools import errors
from eyas.tools.errors import EyasError, NotFound
from eyas.tools.recording.redact import Redactor
from eyas.tools.settings.sizes import SizeValue

SCHEMA_VERSION: Final = 1
_BASE_FIELDS = frozenset({"v", "seq", "kind", "task", "t", "prev"})


class TranscriptError(EyasError):
    """A transcript that cannot be read as one (not a torn last line: that is skipped)."""


class TranscriptMissing(TranscriptError, NotFound):
    """No file where the transcript was looked for."""


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
    prev: str | None = Field(None, description="hash of the line of the event before (chain.py); None: unchained")

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


class OperatorEvent(Crossing):
    """A line the operator typed in `eyas chat` (at the prompt, or answering a confirmation); `closed` when they
    left with Ctrl-D or Ctrl-C instead. Replay types the recorded lines again, turn by turn."""

    REQUEST = ("prompt",)
    kind: Literal["operator"] = "operator"
    prompt: str
    text: str | None = None
    closed: bool = False


class ControlEvent(Crossing):
    """The chat's call into the pipeline run it drives (status, start, resume, answer a gate) and the text back."""

    REQUEST = ("method", "args")
    kind: Literal["control"] = "control"
    method: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: str | None = None


class RunEvent(Event):
    """How the run was started (its config, policy, sizes and first input), so a replay can start it again."""

    REQUEST = ("meta", "config", "input")
    kind: Literal["run"] = "run"
    meta: dict[str, Any]
    config: dict[str, Any]
    input: dict[str, Any] | None = None


class ResumeEvent(Event):
    """`eyas resume` continued the run from its last checkpoint: the checkpoint's step and the nodes it ran next
    (what replay compares) and its id. After a crash, the events before this one end where the crash cut the
    run short; replay stops there too and continues from the same checkpoint."""

    REQUEST = ("step", "next")
    kind: Literal["resume"] = "resume"
    step: int | None = None
    next: list[str] = Field(default_factory=list)
    checkpoint_id: str | None = None


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
    | OperatorEvent
    | ControlEvent
    | ResumeEvent
    | NodeEvent
    | JobLaunchEvent,
    Field(discriminator="kind"),
]
EVENT_TYPES: dict[str, type[Event]] = {cls.model_fields["kind"].default: cls for cls in get_args(get_args(AnyEvent)[0])}
EVENT_ADAPTER = TypeAdapter(AnyEvent)


def build_event(kind: str, fields: dict[str, Any], *, seq: int, task: str, t: float, prev: str | None = None) -> Event:
    """Validate an event of `kind`; raises ValueError naming the kind when a field is wrong."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"Unknown transcript event kind {kind!r}; the kinds are {', '.join(EVENT_TYPES)}")
    return cls.model_validate({**fields, "seq": seq, "task": task, "t": t, "kind": kind, "prev": prev})


def redact_fields(redactor: Redactor, fields: dict[str, Any]) -> dict[str, Any]:
    """The fields as they may be written: secrets replaced, and binary content that hides one dropped."""
    clean = redactor.value(fields)
    if clean.get("encoding") == "base64" and redactor.finds_secret(
        base64.b64decode(clean["content"]).decode("latin-1")
    ):
        clean.update(content=None, encoding=None)
    return clean
