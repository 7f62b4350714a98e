"""A run as the dashboard shows it right now: its outcome (or the gate it waits at), its pending gate and its live
part, read from the run's folder.
The live part (the report's charts among it) is drawn again only when the run's files have changed."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from eyas.agents.faces.dashboard.standing import gate_place, lead_lines
from eyas.agents.faces.dashboard.views import lead, live_part
from eyas.agents.faces.report_html.record import load_record
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.life.run_view import read_run, run_condition
from eyas.graph.life.stored_outcome import known_state, stored_outcome
from eyas.graph.phases.deploy.record import DEPLOY_FILE
from eyas.graph.run_facts import run_facts
from eyas.graph.runs import RunDir
from eyas.tools.recording.redact import Redactor


@dataclass(frozen=True)
class Snapshot:
    html: str  # the live part
    lead: str  # the page's first lines: the outcome and the next step, or the gate it waits at
    pending: tuple[str, GateView | FailureView] | None  # the gate it waits at, its view redacted

    @property
    def gate_id(self) -> str | None:
        return self.pending[0] if self.pending else None


class Snapshots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[tuple[int, ...], Snapshot]] = {}

    def read(self, run: RunDir) -> Snapshot:
        key = (*_stamp(run), run.is_driven())
        with self._lock:
            cached = self._seen.get(run.run_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        view = read_run(run)
        state = known_state(run, view)
        waiting = gate_place(view.pending[1]) if view.pending else None
        record = load_record(run.root, state, waiting)
        pending = None if view.pending is None else (view.pending[0], read_view(Redactor().value(view.pending[1])))
        condition = run_condition(run, view)
        lines = lead_lines(stored_outcome(run, state), waiting, condition, run_facts(state).phase)
        snapshot = Snapshot(live_part(record, condition), lead(Redactor().value(lines)), pending)
        with self._lock:
            self._seen[run.run_id] = (key, snapshot)
        return snapshot


def _stamp(run: RunDir) -> tuple[int, ...]:
    """Size and modification time of each file the snapshot is read from (0 for one not there): the run's progress,
    and deploy.json, which `eyas deploy` and `eyas rollback` write after the run ended."""
    stamp: list[int] = []
    for path in (*run.progress_files, run.root / DEPLOY_FILE):
        try:
            status = path.stat()
        except FileNotFoundError:
            stamp += [0, 0]
            continue
        stamp += [status.st_size, status.st_mtime_ns]
    return tuple(stamp)
