"""Planned against actual time per phase, from a run's own record: how far to trust the next plan.

The plan gives hours per phase before anything starts; the transcript times every launch and monitor node.
A phase's actual time is the sum of its nodes' spans (vocab counts with training, as the plan counts it),
so a gate's wait for an answer is not part of it. The report shows the table once, with the bytes planned and
written beside the times, and tests/bench/bench_plan.py prints it as ratios for the demo.
"""

from __future__ import annotations

from pydantic import BaseModel

from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import h, last_value, megabytes, missing, section, table
from eyas.graph.state import run_plan

# The plan's phases and the timeline rows each one covers.
PHASE_ROWS: dict[str, tuple[str, ...]] = {
    "data": ("data",),
    "extract": ("extract",),
    "train": ("vocab", "train"),
    "evaluate": ("evaluate",),
}


class PhaseTime(BaseModel):
    phase: str
    planned_s: float | None
    actual_s: float | None

    @property
    def ratio(self) -> float | None:
        """Predicted over actual: above 1 the plan was too long, below 1 too short."""
        if self.planned_s is None or not self.actual_s:
            return None
        return self.planned_s / self.actual_s


def phase_times(record: RunRecord) -> list[PhaseTime]:
    """Each planned phase that ran or was planned, in pipeline order."""
    plan = run_plan(record.state)
    times = []
    for phase, rows in PHASE_ROWS.items():
        spans = [span for span in record.spans if span.row in rows and span.kind in ("step", "failure")]
        hours = plan.phase(phase).phase_hours
        actual = sum(span.end - span.start for span in spans) if spans else None
        if hours is None and actual is None:
            continue
        times.append(PhaseTime(phase=phase, planned_s=None if hours is None else hours * 3600, actual_s=actual))
    return times


def format_minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def format_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def plan_against_actual(record: RunRecord) -> str:
    """The report's Plan section: each phase's planned and actual time and bytes, in one table."""
    plan = run_plan(record.state)
    if not plan.phases:
        return section("plan", "Plan against actual", missing("a plan"))
    written = {"extract": last_value(record.job_progress("extract"), "bytes")}
    rows = [
        (h(t.phase), h(format_minutes(t.planned_s)), h(format_minutes(t.actual_s) if t.actual_s else "not run"),
         h(format_ratio(t.ratio)), h(megabytes(plan.phase(t.phase).disk_bytes)),
         h(megabytes(written[t.phase]) if written.get(t.phase) else "not measured"))
        for t in phase_times(record)
    ]  # fmt: skip
    headers = ("phase", "planned", "took", "planned / took", "planned bytes", "written bytes")
    return section("plan", "Plan against actual", table(headers, rows))
