"""Writing a transcript: one line per event, fsynced, each linked to the line before it (chain.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.private_files import open_private
from eyas.tools.recording.chain import GENESIS, link
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.task_scope import current_task
from eyas.tools.recording.transcript import Event, build_event, redact_fields
from eyas.tools.recording.transcript_reader import read_transcript


class TranscriptWriter:
    """Appends events with a flush and fsync each, from any thread; continues an existing transcript (its seq
    numbers and its chain, from the last complete event: a line cut by a crash is left out of both)."""

    def __init__(self, path: Path, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor()
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = read_transcript(path) if path.exists() else None
        self._next_seq = max((event.seq for event in existing.events), default=-1) + 1 if existing else 0
        self._prev = existing.last_link if existing and existing.events else GENESIS
        self._file = open_private(path, "ab")
        if self._file.tell() > 0 and not _ends_with_newline(path):
            # A torn last line from a crash: end it, so the next event starts on its own line.
            self._write_line(b"\n")

    def write(self, kind: str, fields: dict[str, Any]) -> Event:
        """Redact, validate and append one event of the current task."""
        clean = redact_fields(self.redactor, fields)
        with self._lock:
            event = build_event(
                kind, clean, seq=self._next_seq, task=current_task(), t=SYSTEM_CLOCK.now(), prev=self._prev
            )
            line = event.model_dump_json(exclude_none=True)
            self._write_line(line.encode() + b"\n")
            self._next_seq += 1
            self._prev = link(json.loads(line))
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
