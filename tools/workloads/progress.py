"""Progress lines shared by every workload: one JSON object per line after a fixed tag.

A workload prints `EYAS_PROGRESS {"done": 120, "total": 300, ...}` to stdout (its job log); eyas reads
the last such line of the log to show a progress bar and an ETA. The module is plain Python with no
dependencies, so workloads import it from their own directory on the host.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

TAG = "EYAS_PROGRESS "


def emit(**fields: Any) -> None:
    """Print one progress line; `done` and `total` are expected, anything else is free-form."""
    fields.setdefault("time", round(time.time(), 3))
    sys.stdout.write(TAG + json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def last_progress(log_text: str) -> dict[str, Any] | None:
    """The newest well-formed progress line of a log, or None (a torn last line is skipped)."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(TAG):
            try:
                value = json.loads(line[len(TAG) :])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None
