"""Detached drivers: the eyas process that drives a run, started as a detached job on this machine, supervised
exactly like the jobs on a host (tools/jobs/detached.py: setsid, a log, a pid with its start time, an exit code).

Each start is a new job, runs/<run>/jobs/driver-<n>/, so the log of a driver that died stays beside the one that
replaced it. Claiming a job id is atomic and every driver holds the run's lock, so two starts at once (two
watchers, an operator and a watcher) never drive the run twice."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from eyas.graph.life.heartbeat import DRIVER_JOB_ENV
from eyas.graph.runs import RunDir
from eyas.tools.errors import EyasError
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState, JobStatus

DRIVER_PREFIX = "driver-"


def driver_jobs(run: RunDir) -> Jobs:
    """The run's driver jobs, in runs/<run>/jobs/ on this machine."""
    return Jobs(LocalHost(), str(run.root))


def _number(job_id: str) -> int:
    tail = job_id.removeprefix(DRIVER_PREFIX)
    return int(tail) if job_id.startswith(DRIVER_PREFIX) and tail.isdigit() else 0


def drivers(run: RunDir) -> list[JobState]:
    """Every driver the run had, oldest first."""
    jobs_dir = run.root / "jobs"
    if not jobs_dir.is_dir():
        return []
    ids = sorted((path.name for path in jobs_dir.iterdir() if _number(path.name)), key=_number)
    return driver_jobs(run).statuses(ids)


def latest_driver(run: RunDir) -> JobState | None:
    found = drivers(run)
    return found[-1] if found else None


def driver_log(state: JobState) -> Path:
    return Path(state.directory) / "log"


def is_driving(run: RunDir, latest: JobState | None) -> bool:
    """Whether a driver is alive: a process holds the run's lock, or the newest driver job still runs (it may be
    starting, before it takes the lock, or finishing its report after it let go)."""
    return run.is_driven() or (latest is not None and latest.status is JobStatus.RUNNING)


def start_driver(
    run: RunDir, args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> JobState:
    """Start `eyas ARGS` as the run's next driver job, with this interpreter and the run's runs folder. Refused
    while a driver is alive. `cwd` (default: here) is where the command's relative paths and ./eyas.toml are
    found; `env` adds to the environment it inherits."""
    latest = latest_driver(run)
    if is_driving(run, latest):
        raise EyasError(
            f"Run {run.run_id} has a driver already (`eyas status {run.run_id}` shows it); a second one is not started."
        )
    job_id = f"{DRIVER_PREFIX}{_number(latest.job_id) + 1 if latest else 1}"
    spec = JobSpec(
        job_id=job_id,
        argv=[sys.executable, "-m", "eyas", *args],
        env={
            # Its log is read in a terminal later: lines as wide as the operator's, else wide enough not to wrap.
            "COLUMNS": os.environ.get("COLUMNS") or "160",
            **(env or {}),
            "EYAS_RUNS_DIR": str(run.root.parent),
            DRIVER_JOB_ENV: job_id,
            "PYTHONUNBUFFERED": "1",
        },
        cwd=str(cwd or Path(os.getcwd())),
    )
    return driver_jobs(run.create()).launch(spec)
