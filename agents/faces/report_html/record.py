"""What a run folder says about the run: its final state, the timeline of its nodes, gates and jobs, and the
progress its jobs printed, read from the transcript (and the state, when the caller has it).

A run's state is folded from the transcript's node outputs when no state is given, so a report can be built
for any recorded run, even one whose checkpoint DB is gone or whose code has changed since.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from eyas.graph.life.transcript_state import fold_state
from eyas.graph.phases.deploy.record import DEPLOY_FILE, read_deploy
from eyas.tools.errors import EyasError
from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.transcript import ApprovalEvent, CommandEvent, Event, NodeEvent, RunEvent, TranscriptError
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.workloads.progress import TAG

_JOB_LOG = re.compile(r"/jobs/([^/\s'\"]+)/log\b")


class Span(BaseModel):
    """One bar of the timeline: a node's run, or the wait for an answer at a gate."""

    row: str = Field(description="the timeline row: a phase, a gate or a step such as verify")
    kind: Literal["step", "gate", "wait", "failure"]
    start: float
    end: float
    label: str = ""


class RunRecord(BaseModel):
    run_id: str
    meta: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict, description="the config the run started with (redacted)")
    state: dict[str, Any] = Field(default_factory=dict)
    spans: list[Span] = Field(default_factory=list)
    progress: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict, description="job id -> its EYAS_PROGRESS rows, in time order"
    )
    log_tails: dict[str, str] = Field(default_factory=dict, description="job id -> the end of its log, last read")
    started: float | None = None
    ended: float | None = None
    missing: list[str] = Field(default_factory=list, description="what the run folder lacks, said in the report")
    deploy: DeployResult | None = Field(None, description="deploy.json: the drafter put into production, or not")
    waiting: str | None = Field(None, description="the gate the run waits at ('the data gate'), on the dashboard")

    def job_progress(self, phase: str) -> list[dict[str, Any]]:
        """The progress rows of a phase's jobs (a retried phase has several), in time order."""
        rows = [row for job_id in self.state.get("jobs", {}).get(phase, []) for row in self.progress.get(job_id, [])]
        return sorted(rows, key=lambda row: float(row.get("time", 0.0)))


def load_record(run_root: Path, state: dict[str, Any] | None = None, waiting: str | None = None) -> RunRecord:
    """The record of the run in `run_root`, with `state` as its final state when given, else folded from the
    transcript's events; `waiting` the gate it waits at, if any. Secrets are redacted from everything it holds."""
    missing: list[str] = []
    meta = _read_json(run_root / "run.json", missing)
    try:
        events: list[Event] = list(read_transcript(run_root / "transcript.jsonl").events)
    except TranscriptError as exc:
        events = []
        missing.append(f"the transcript ({exc})")
    folded = fold_state(events)
    final = state if state is not None else folded
    final.setdefault("run_id", folded.get("run_id") or run_root.name)
    times = [event.t for event in events]
    record = RunRecord(
        run_id=str(final["run_id"]),
        meta=meta,
        config=next((event.config for event in events if isinstance(event, RunEvent)), {}),
        state=final,
        spans=timeline(events),
        progress=job_progress(events),
        log_tails=log_tails(events),
        started=min(times, default=None),
        ended=max(times, default=None),
        missing=missing,
        deploy=_read_deploy(run_root / DEPLOY_FILE, missing),
        waiting=waiting,
    )
    return RunRecord.model_validate(Redactor().value(record.model_dump()))


def _read_deploy(path: Path, missing: list[str]) -> DeployResult | None:
    try:
        return read_deploy(path)
    except EyasError as exc:
        missing.append(str(exc))
        return None


def _read_json(path: Path, missing: list[str]) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        missing.append(f"{path.name} (not there or not JSON)")
        return {}
    return value if isinstance(value, dict) else {}


def timeline(events: list[Event]) -> list[Span]:
    """Each node as a bar in its phase's row (launch and monitor of a phase share one), each gate's wait for an
    answer, and each node that failed."""
    starts: dict[tuple[str, str], float] = {}
    spans: list[Span] = []
    for event in events:
        if isinstance(event, NodeEvent):
            key = (event.task, event.node)
            if event.phase == "start":
                starts[key] = event.t
                continue
            start = starts.pop(key, event.t)
            kind = "failure" if event.error else ("gate" if event.node.startswith("gate_") else "step")
            label = f"{event.error.type}: {event.error.message}" if event.error else event.node
            spans.append(Span(row=_row(event.node), kind=kind, start=start, end=event.t, label=label))
        elif isinstance(event, ApprovalEvent):
            waited = event.duration_s or 0.0
            decided = event.decision or "no answer: the run stopped here"
            label = f"{event.gate}: {decided}" + (f" by {event.who}" if event.who else "")
            spans.append(Span(row=_row(f"gate_{event.gate}"), kind="wait", start=event.t - waited, end=event.t,
                              label=label))  # fmt: skip
    return spans


def _row(node: str) -> str:
    """launch_train, monitor_train -> train; gate_train -> gate train; anything else is its own row."""
    for prefix, row in (("launch_", ""), ("monitor_", ""), ("gate_", "gate ")):
        if node.startswith(prefix):
            return row + node.removeprefix(prefix)
    return node


def job_progress(events: list[Event]) -> dict[str, list[dict[str, Any]]]:
    """Every distinct progress line the run read from its jobs' logs (each poll re-reads the log's tail)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for event in events:
        if not isinstance(event, CommandEvent) or (match := _JOB_LOG.search(event.command)) is None:
            continue
        for line in event.stdout.splitlines():
            if not line.startswith(TAG):
                continue
            try:
                row = json.loads(line[len(TAG) :])
            except json.JSONDecodeError:
                continue  # cut by the tail's first line or a write in progress
            if isinstance(row, dict):
                found.setdefault(match.group(1), {})[line] = row
    return {job: sorted(rows.values(), key=lambda row: float(row.get("time", 0.0))) for job, rows in found.items()}


def log_tails(events: list[Event]) -> dict[str, str]:
    """The end of each job's log as the run's last poll of it read it."""
    tails: dict[str, str] = {}
    for event in events:
        if not isinstance(event, CommandEvent) or not event.command.startswith("tail "):
            continue  # a launch or a status check names the log too
        if (match := _JOB_LOG.search(event.command)) is not None:
            tails[match.group(1)] = event.stdout
    return tails
