"""Reading a transcript: every complete event, a line cut by a crash skipped with a warning, any other bad line
refused with its number and what is wrong; and the hash chain checked over what was read (chain.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from eyas.tools.recording.chain import ChainCheck, Written, link, verify
from eyas.tools.recording.transcript import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    SCHEMA_VERSION,
    AnyEvent,
    TranscriptError,
    TranscriptMissing,
)
from eyas.tools.settings.local_files import not_a_regular_file


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
    chain: ChainCheck = Field(default_factory=lambda: ChainCheck(status="empty"))
    last_link: str | None = Field(None, description="what an event appended now records as its prev")

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
    written: list[Written] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if _cut_short(raw):
            torn.append(number)
            continue
        try:
            event, data = _event(raw)
            events.append(event)
            written.append(Written(number, link(data), event.seq, event.prev))
        except _BadLine as bad:
            if keep_unknown and bad.unknown is not None:
                skipped.append(SkippedLine(line=number, before=len(events), kind=bad.unknown, problem=str(bad)))
                written.append(_unknown_written(number, raw))
                continue
            fix = OTHER_VERSION_FIX if bad.unknown is not None else CORRUPT_FIX
            raise TranscriptError(f"{path}: line {number} {bad}. {fix}") from None
    warnings = [
        f"{path}: line {number} is incomplete ({len(lines[number - 1])} bytes, "
        f"{'the end of the file' if number >= len(lines) - 1 else 'followed by a resumed run'}): "
        "the run was cut short while writing it; it is skipped"
        for number in torn
    ]
    return Transcript(
        path=str(path), events=events, warnings=warnings, torn_lines=torn, skipped=skipped,
        chain=verify(written), last_link=written[-1].hash if written else None,
    )  # fmt: skip


def _unknown_written(number: int, raw: bytes) -> Written:
    """An event of another eyas in the chain: its link is read as plainly as its JSON allows."""
    data = json.loads(raw)
    seq, prev = data.get("seq"), data.get("prev")
    return Written(number, link(data), seq if isinstance(seq, int) else -1, prev if isinstance(prev, str) else None)


def _read_lines(path: Path) -> list[bytes]:
    # A FIFO or a device (eyas show /dev/zero) would be read forever: refused before it is opened.
    special = not_a_regular_file(path)
    if special is not None and path.exists() and not path.is_dir():
        raise TranscriptError(f"{path} {special}, so no transcript; pass a runs/<run_id>/transcript.jsonl file.")
    try:
        return path.read_bytes().split(b"\n")
    except FileNotFoundError:
        raise TranscriptMissing(
            f"No transcript at {path}; runs keep theirs at runs/<run_id>/transcript.jsonl."
        ) from None
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


# A \\u escape of half a UTF-16 surrogate pair (D800-DFFF): JSON allows one alone, text does not.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(raw: bytes, data: Any) -> None:
    """A string that holds half a surrogate pair (`"\\ud800"` alone) is no text: its hash, and any print of it,
    would fail later with UnicodeEncodeError; eyas writes none, so the line is damaged. Checked only on a line
    that spells such an escape, which the writer (pydantic's JSON, other text as UTF-8) never does."""
    if not _SURROGATE_ESCAPE.search(raw):
        return
    try:
        json.dumps(data, ensure_ascii=False).encode()
    except RecursionError:
        raise _BadLine("nests JSON deeper than Python reads") from None
    except UnicodeEncodeError as exc:
        half = ord(exc.object[exc.start])
        raise _BadLine(
            f"holds \\u{half:04x}, half of a UTF-16 surrogate pair without its other half, so not text"
        ) from None


def _event(raw: bytes) -> tuple[AnyEvent, dict[str, Any]]:
    """One line as an event (and as the JSON it is), or _BadLine saying what is wrong with it."""
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
    _refuse_lone_surrogates(raw, data)
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
        return EVENT_ADAPTER.validate_python(data), data
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise _BadLine(f"is not a valid event ({where}: {problem['msg']})") from None
    except RecursionError:
        raise _BadLine("nests JSON deeper than Python reads") from None
