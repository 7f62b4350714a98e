"""A job's progress in words, from its progress lines (tools/workloads/progress.py): the count it reports (a
training's steps, an evaluation's prompts, a download's bytes) and the figures beside it (loss, tokens/s,
acceptance). A job's last line need not carry them all (training ends with `{"phase": "done"}`), so the terminal
keeps the last value of each field, as the dashboard does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.tools.settings.units import format_size
from eyas.tools.workloads.progress import progress_lines

COUNTED_PHASE = "counted_phase"  # the phase of the last line that carried a total: what the count counts
TRAINING_PHASES = ("train", "resumed", "checkpoint")  # their done/total are optimizer steps


def merged(before: Mapping[str, Any], latest: Mapping[str, Any]) -> dict[str, Any]:
    """The job's progress so far: each field's newest value, a field the latest line lacks kept from before."""
    seen = {**before, **{key: value for key, value in latest.items() if value is not None}}
    if latest.get("total") is not None:
        seen[COUNTED_PHASE] = latest.get("phase")
    return seen


def progress_in(log_text: str) -> dict[str, Any]:
    """A job's progress as far as its log's progress lines tell, each field's newest value (a torn line skipped)."""
    seen: dict[str, Any] = {}
    for value in progress_lines(log_text.splitlines()):
        seen = merged(seen, value)
    return seen


def count_text(seen: Mapping[str, Any]) -> str:
    """'step 154/154', 'speculative-k3 20/20', '1.20 MB of 3.00 MB', '120/300'; empty when no total was reported."""
    total, done = seen.get("total"), float(seen.get("done") or 0)
    if not total:
        return ""
    if seen.get("unit") == "bytes":
        return f"{format_size(done)} of {format_size(float(total))}"
    phase = seen.get(COUNTED_PHASE)
    label = "step " if phase in TRAINING_PHASES else f"{phase} " if phase else ""
    return f"{label}{done:,.0f}/{float(total):,.0f}"


def detail_text(seen: Mapping[str, Any]) -> str:
    """The figures a job reported beside its count, in words and units; empty when it reported none."""
    parts = []
    if seen.get("failed"):
        parts.append(f"{float(seen['failed']):,.0f} failed")
    if seen.get("loss") is not None:
        parts.append(f"loss {float(seen['loss']):.3g}")
    if seen.get("tokens_per_s") is not None:
        parts.append(f"{float(seen['tokens_per_s']):,.0f} tokens/s")
    if seen.get("mean_acceptance_length") is not None:
        parts.append(f"acceptance length {float(seen['mean_acceptance_length']):.2f}")
    if seen.get("speedup") is not None:
        parts.append(f"speedup {float(seen['speedup']):.2f}x")
    return ", ".join(parts)
