"""The net under every line the command line prints: a text stream that redacts before it writes.

Tables, --json output, errors and notices all end in sys.stdout or sys.stderr, so wrapping those once covers
the outputs no single call site remembers to redact.
"""

from __future__ import annotations

import io
import sys
from typing import TextIO

from eyas.tools.recording.redact import Redactor


class RedactedStream(io.TextIOBase):
    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(Redactor().text(text))
        return len(text)

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
