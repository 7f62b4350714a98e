"""A job's progress in words, from its progress lines (tools/workloads/progress.py): the count it reports (a
training's steps, an evaluation's prompts, a download's bytes) and the figures beside it (loss, tokens/s,
acceptance). A job's last line need not carry them all (training ends with `{"phase": "done"}`), so the terminal
keeps the last value of each field (tools/jobs/job_progress.py), as the dashboard does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.tools.jobs.job_progress import COUNTED_PHASE
from eyas.tools.settings.units import format_size

TRAINING_PHASES = ("train", "resumed", "checkpoint", "val")  # their done/total are optimizer steps


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
