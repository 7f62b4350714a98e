"""A job's progress as its log's progress lines tell it (tools/workloads/progress.py), each field's newest value.

A job's last line need not carry every field (training ends with `{"phase": "done"}`, after its validation line), and
a poll sees only what the log holds then, so each reader merges: the supervisor over the lines a poll reads, the
terminal over its polls. Reading the last line alone left a finished training's bar at the step of the poll before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.tools.workloads.progress import progress_lines

COUNTED_PHASE = "counted_phase"  # the phase of the last line that carried a total: what the count counts


def merged(before: Mapping[str, Any], latest: Mapping[str, Any]) -> dict[str, Any]:
    """The job's progress so far: each field's newest value, a field the latest line lacks kept from before. `latest`
    may itself be merged (a poll's tail read with progress_in), and then it says what its count counts."""
    seen = {**before, **{key: value for key, value in latest.items() if value is not None}}
    if latest.get("total") is not None and COUNTED_PHASE not in latest:
        seen[COUNTED_PHASE] = latest.get("phase")
    return seen


def progress_in(log_text: str) -> dict[str, Any]:
    """A job's progress as far as its log's progress lines tell, each field's newest value (a torn line skipped)."""
    seen: dict[str, Any] = {}
    for value in progress_lines(log_text.splitlines()):
        seen = merged(seen, value)
    return seen
