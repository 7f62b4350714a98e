"""The driver's heartbeat: runs/<run>/heartbeat.json, rewritten every few seconds by the eyas process driving the
run, so that `eyas watch` can tell a driver that died (OOM, reboot, kill -9: the beats stop without a last word)
from one that ended (its last beat says how) and one that still works (its beats are fresh)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel, ValidationError

from eyas.graph.runs import RunDir
from eyas.tools.private_files import write_private

HEARTBEAT_INTERVAL_S = 10.0
# A driver whose last beat is older than this many intervals has stopped beating: it is dead or frozen. Generous,
# because a frozen driver is stopped: a driver starved of CPU on a busy machine was seen to beat 26 s late.
STALE_AFTER_BEATS = 12
# Set in a detached driver's environment: the id of its job, so the watch knows which job a beat comes from.
DRIVER_JOB_ENV = "EYAS_DRIVER_JOB"


class Beat(BaseModel):
    """One heartbeat, as the file holds it."""

    pid: int
    at: float  # seconds since the epoch
    interval_s: float
    driving: bool  # False once the driver ended on its own; `exit` then says how
    job: str | None = None  # the driver's job when it runs detached
    exit: str | None = None
    failed: bool = False  # it ended with an error (not finished, stopped or waiting at a gate)
    host: str | None = None
    host_unreachable_since: float | None = None

    @property
    def stale_after_s(self) -> float:
        return self.interval_s * STALE_AFTER_BEATS

    def age_s(self, now: float) -> float:
        return max(0.0, now - self.at)

    def is_stale(self, now: float) -> bool:
        return self.age_s(now) > self.stale_after_s


def heartbeat_path(run: RunDir) -> Path:
    return run.root / "heartbeat.json"


def read_beat(run: RunDir) -> Beat | None:
    """The last beat, or None when the run was never driven by an eyas that beats (or the file is unreadable)."""
    try:
        return Beat.model_validate(json.loads(heartbeat_path(run).read_text()))
    except (FileNotFoundError, json.JSONDecodeError, ValidationError):
        return None


class Heartbeat:
    """Beats from a thread while the block runs; the last beat says how the driver ended. The thread shows the
    process is alive and not frozen; a run that makes no progress for other reasons shows that in its jobs."""

    def __init__(self, run: RunDir, interval_s: float = HEARTBEAT_INTERVAL_S) -> None:
        self._run = run
        self._beat = Beat(pid=os.getpid(), at=time.time(), interval_s=interval_s, driving=True,
                          job=os.environ.get(DRIVER_JOB_ENV) or None)  # fmt: skip
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_on, name="eyas-heartbeat", daemon=True)

    def _write(self, **changes: object) -> None:
        with self._lock:
            self._beat = self._beat.model_copy(update={**changes, "at": time.time()})
            write_private(heartbeat_path(self._run), self._beat.model_dump_json() + "\n")

    def _beat_on(self) -> None:
        while not self._stop.wait(self._beat.interval_s):
            self._write()

    def host_outage(self, host: str, since: float | None) -> None:
        """Say in the beat that `host` is unreachable since `since` (None: it answers again); `eyas status` shows it."""
        self._write(host=host, host_unreachable_since=since)

    def ended(self, how: str) -> None:
        """How the drive ended, for the last beat."""
        self._write(exit=how)

    def __enter__(self) -> Heartbeat:
        self._write()
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        if exc is not None:
            self._write(driving=False, failed=True, exit=f"{exc_type.__name__ if exc_type else 'error'}: {exc}")
        else:
            self._write(driving=False)
