"""Progress lines shared by every workload: one JSON object per line after a fixed tag.

A workload prints `EYAS_PROGRESS {"done": 120, "total": 300, ...}` to stdout (its job log); eyas reads
the last such line of the log to show a progress bar and an ETA. The module is plain Python with no
dependencies, so workloads import it from their own directory on the host.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

TAG = "EYAS_PROGRESS "


def emit(**fields: Any) -> None:
    """Print one progress line; `done` and `total` are expected, anything else is free-form."""
    fields.setdefault("time", round(time.time(), 3))
    sys.stdout.write(TAG + json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def progress_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The well-formed progress lines among `lines`, in their order (a torn line is skipped)."""
    for line in lines:
        if line.startswith(TAG):
            try:
                value = json.loads(line[len(TAG) :])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                yield value


def last_progress(log_text: str) -> dict[str, Any] | None:
    """The newest well-formed progress line of a log, or None."""
    return next(progress_lines(reversed(log_text.splitlines())), None)
