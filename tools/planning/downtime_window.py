"""One production downtime window: GPU phases that each need production stopped, back to back in the pipeline's
order, share one stop and one restart, so production's load (about 22 minutes for the motivating service) is paid
once, not once per phase.

The plan keeps each phase's downtime (`ProductionImpact.downtime_hours`), counted so that the downtimes of a
window's phases add up to the window's: each phase's own hours, and the load once, on the window's last phase (the
one after which production starts again). The pipeline (graph/window.py) keeps production stopped between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise

from pydantic import BaseModel

from eyas.tools.planning.gpu_budget import GPU_PHASES, ProductionImpact


class DowntimeWindow(BaseModel):
    """Consecutive GPU phases that stop production, stopped once before the first and started once after the
    last; `downtime_hours` is the whole window's (phases and one load), None when a phase's hours are unknown."""

    phases: list[str]
    downtime_hours: float | None
    load_s: float | None

    @property
    def first(self) -> str:
        return self.phases[0]

    @property
    def last(self) -> str:
        return self.phases[-1]

    def line(self) -> str:
        """The window in words: its phases, its downtime, one stop and one start."""
        hours = "an unknown time" if self.downtime_hours is None else f"{self.downtime_hours:.2f} h"
        load = "" if self.load_s is None else f", production's {self.load_s / 60:.0f} min load counted once"
        return (
            f"production down {hours} for {', '.join(self.phases)}{load}: stopped once before {self.first}, "
            f"started once after {self.last}"
        )


def _runs(impacts: Mapping[str, ProductionImpact | None]) -> list[list[str]]:
    """The GPU phases that stop production, grouped where they follow each other."""
    runs: list[list[str]] = []
    previous = False
    for phase in GPU_PHASES:
        impact = impacts.get(phase)
        stops = impact is not None and impact.action == "stop"
        if stops and previous:
            runs[-1].append(phase)
        elif stops:
            runs.append([phase])
        previous = stops
    return runs


def one_window(impacts: dict[str, ProductionImpact], load_s: float) -> dict[str, ProductionImpact]:
    """The impacts with each window's load counted once: every phase of a window but its last keeps production
    stopped for the next, so its downtime is its own hours."""
    merged = dict(impacts)
    for run in _runs(impacts):
        for phase, following in pairwise(run):
            impact = impacts[phase]
            hours = None if impact.downtime_hours is None else max(0.0, impact.downtime_hours - load_s / 3600)
            window = f"one downtime window, {', '.join(run)}: production loads once, after {run[-1]}"
            reason = f"{impact.reason}; but it stays stopped for {following} ({window})"
            merged[phase] = impact.model_copy(update={"downtime_hours": hours, "reason": reason})
    return merged


def downtime_windows(impacts: Mapping[str, ProductionImpact | None], load_s: float | None) -> list[DowntimeWindow]:
    """The plan's windows, from its per-phase impacts (whose downtimes count each window's load once)."""
    windows = []
    for run in _runs(impacts):
        hours = [impact.downtime_hours for phase in run if (impact := impacts[phase]) is not None]
        total = None if None in hours else sum(h for h in hours if h is not None)
        windows.append(DowntimeWindow(phases=run, downtime_hours=total, load_s=load_s))
    return windows
