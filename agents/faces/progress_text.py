"""A job's progress in words, from its progress lines (tools/workloads/progress.py): the count it reports (a
training's steps, an evaluation's prompts, a download's bytes) and the figures beside it (loss, tokens/s,
acceptance). A job's last line need not carry them all (training ends with `{"phase": "done"}`), so the terminal
keeps the last value of each field (tools/jobs/job_progress.py), as the dashboard does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.tools.jobs.job_progress import COUNTED_PHASE, merged
from eyas.tools.settings.units import figure, format_hours, format_size
from eyas.tools.workloads.progress import progress_lines

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


def number(value: Any) -> float | None:
    """A figure of a progress line as a number; None for anything else (the line comes from the host: a figure of
    another shape is left out, never fatal to the run's screen)."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def rate_text(value: Any) -> str | None:
    """tokens_per_s in words: one rate, or one per server where the evaluation measures its servers interleaved
    ({"baseline": 12.3, "speculative-k3": 10.1})."""
    if isinstance(value, Mapping):
        rates = [f"{name} {figure(rate)}" for name, raw in value.items() if (rate := number(raw)) is not None]
        return f"{', '.join(rates)} tokens/s" if rates else None
    rate = number(value)
    return None if rate is None else f"{figure(rate)} tokens/s"


def detail_text(seen: Mapping[str, Any]) -> str:
    """The figures a job reported beside its count, in words and units; empty when it reported none."""
    shown = {
        "failed": lambda v: f"{v:,.0f} failed" if v else None,
        "loss": lambda v: f"loss {v:.3g}",
        "mean_acceptance_length": lambda v: f"acceptance length {v:.2f}",
        "speedup": lambda v: f"speedup {v:.2f}x",
    }
    parts = []
    for key in ("failed", "loss", "tokens_per_s", "mean_acceptance_length", "speedup"):
        if key == "tokens_per_s":
            said = rate_text(seen.get(key))
        else:
            value = number(seen.get(key))
            said = None if value is None else shown[key](value)
        if said:
            parts.append(said)
    return ", ".join(parts)


def time_left_text(eta_s: float) -> str | None:
    """'under a minute left', '1.5 h left'; None for an estimate below zero (a clock that stepped back)."""
    if eta_s < 0:
        return None
    return "under a minute left" if eta_s < 60 else f"{format_hours(eta_s / 3600)} left"


def line_text(row: Mapping[str, Any]) -> str:
    """One progress line in words, as a log shows it to a person: 'progress: 7/24 (29%), 56.9 tokens/s, under a
    minute left'; a line without a count says its phase ('progress: server')."""
    seen = merged({}, row)
    count = count_text(seen)
    done, total = number(seen.get("done")), number(seen.get("total"))
    if count and done is not None and total:
        count += f" ({100 * done / total:.0f}%)"
    eta = number(seen.get("eta_s"))
    left = time_left_text(eta) if eta is not None else None
    said = ", ".join(part for part in (count, detail_text(seen), left) if part)
    return f"progress: {said or seen.get('phase') or 'reported'}"


def log_text(log: str) -> str:
    """A job's log with each progress line in words (tools/workloads/progress.py's protocol is for eyas, not for
    the person reading the log); a torn one stays as it was written."""
    lines = []
    for line in log.splitlines():
        row = next(progress_lines([line]), None)
        lines.append(line if row is None else line_text(row))
    return "\n".join(lines)
