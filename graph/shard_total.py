"""A sharded phase's progress as one figure. With generation split over many endpoints (or extraction over many
nodes) the operator asks "how far is the phase?", not "how far is shard 3?": the jobs' counts add up, their
throughputs add up, and the phase ends with its slowest job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def phase_total(progress: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The summed `done`, `total` and `failed` of a phase's jobs (their last progress lines), the summed
    `tokens_per_s` of those still working, and the longest `eta_s` among them; None for fewer than two jobs
    that report a total (one job's own line says it all)."""
    counted = [seen for seen in progress if seen.get("total")]
    if len(counted) < 2:
        return None
    working = [seen for seen in counted if float(seen.get("done") or 0) < float(seen["total"])]
    # One rate a job (the evaluation's interleaved lines carry one per server: not a shard's rate, left out).
    rates = [float(rate) for seen in working if isinstance(rate := seen.get("tokens_per_s"), int | float)]
    etas = [float(seen["eta_s"]) for seen in working if seen.get("eta_s") is not None]
    return {
        "jobs": len(counted),
        "done": sum(float(seen.get("done") or 0) for seen in counted),
        "total": sum(float(seen["total"]) for seen in counted),
        "failed": sum(float(seen.get("failed") or 0) for seen in counted),
        "tokens_per_s": round(sum(rates), 1) if rates else None,
        "eta_s": max(etas) if etas else (0.0 if not working else None),
    }
