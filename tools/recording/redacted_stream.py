"""The net under every line the command line prints: a text stream that redacts, and shows control characters as
text, before it writes.

Tables, --json output, errors and notices all end in sys.stdout or sys.stderr, so wrapping those once covers
the outputs no single call site remembers to redact. What is written to the stream itself (print, a log line, a
job's log tail) has its control characters made visible (tools/recording/visible.py): a host's ESC sequence never
reaches the terminal. eyas's own rich consoles write through `styled` instead, which only redacts: they made
the text they were given visible before they styled it, and their colours and cursor moves are theirs.
"""

from __future__ import annotations

import io
import sys
from typing import TextIO

from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.visible import visible


class RedactedStream(io.TextIOBase):
    def __init__(self, inner: TextIO, *, show_controls: bool = True) -> None:
        self._inner = inner
        self._show_controls = show_controls
        self._styled: RedactedStream | None = None

    def write(self, text: str) -> int:
        redacted = Redactor().text(text)
        self._inner.write(visible(redacted) if self._show_controls else redacted)
        return len(text)

    @property
    def styled(self) -> RedactedStream:
        """The same stream, redacting only: for a console whose escape codes are its own styling."""
        if not self._show_controls:
            return self
        if self._styled is None:
            self._styled = RedactedStream(self._inner, show_controls=False)
        return self._styled

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding


def redact_standard_streams() -> None:
    """Wrap sys.stdout and sys.stderr (once) for the rest of the process."""
    if not isinstance(sys.stdout, RedactedStream):
        sys.stdout = RedactedStream(sys.stdout)
    if not isinstance(sys.stderr, RedactedStream):
        sys.stderr = RedactedStream(sys.stderr)
