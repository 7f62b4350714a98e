"""`eyas watch`: keep runs driven. A run whose driver stopped beating without a last word (OOM, reboot, kill -9)
is resumed as a detached driver; a frozen driver of its own is stopped first; anything else that needs a person
(a driver that ended with an error, too many restarts) is told through the run's notify_command, once.

It never starts a second driver: a driver is alive while it holds the run's lock or its job still runs, the
decision and the start happen under the run's watch lock, and the job id is claimed atomically."""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from eyas.graph.life.driver import driver_jobs, driver_log, is_driving, latest_driver, start_driver
from eyas.graph.life.heartbeat import Beat, read_beat
from eyas.graph.run_damage import Damage, read_undamaged
from eyas.graph.runs import RunDir, list_runs
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.patience import stamp
from eyas.tools.jobs.detached import JobState, JobStatus
from eyas.tools.notify import send_notice
from eyas.tools.private_files import open_private, write_private
from eyas.tools.recording.redact import Redactor

MAX_RESTARTS = 5  # per run: a driver that dies again and again (an OOM at the same step) needs a person


class Condition(StrEnum):
    UNWATCHED = "unwatched"  # never driven by an eyas that beats
    ALIVE = "alive"
    FROZEN = "frozen"  # holds the lock, but its beats stopped
    DIED = "died"  # its beats stopped without a last word and nothing drives the run
    NEVER_STARTED = "never started"  # the newest driver job ended before its first beat
    ENDED = "ended"  # the last beat says how it ended
    GIVEN_UP = "given up"  # it died again after the most restarts the watch makes


# Nothing more for the watch to do until someone starts a driver again.
SETTLED = (Condition.UNWATCHED, Condition.NEVER_STARTED, Condition.ENDED, Condition.GIVEN_UP)


@dataclass(frozen=True)
class Assessment:
    condition: Condition
    beat: Beat | None
    driver: JobState | None
    detail: str

    @property
    def driver_id(self) -> str:
        return self.driver.job_id if self.driver is not None else "-"


def assess(run: RunDir, now: float) -> Assessment:
    """Where the run's driver stands, from its heartbeat, its lock and its newest driver job."""
    beat, job = read_beat(run), latest_driver(run)
    if beat is None and job is None:
        return Assessment(Condition.UNWATCHED, None, None, "no heartbeat and no driver job")
    if is_driving(run, job):
        if beat is not None and beat.driving and beat.is_stale(now) and run.is_driven():
            detail = f"its last beat is {beat.age_s(now):.0f} s old (stale after {beat.stale_after_s:.0f} s)"
            return Assessment(Condition.FROZEN, beat, job, detail)
        return Assessment(Condition.ALIVE, beat, job, "driving")
    if job is not None and never_beat(job, beat):
        return Assessment(Condition.NEVER_STARTED, beat, job, f"driver job {job.job_id} {job.describe()}")
    assert beat is not None  # a job without a beat of its own was handled above
    if not beat.driving:
        return Assessment(Condition.ENDED, beat, job, (beat.exit or "ended").rstrip("."))
    how = f"job {job.job_id} {job.describe()}" if job is not None else f"pid {beat.pid} is gone"
    return Assessment(Condition.DIED, beat, job, f"{how}; its last beat {beat.age_s(now):.0f} s ago")


def never_beat(job: JobState, beat: Beat | None) -> bool:
    """Whether the newest driver job ended without a beat of its own: the last beat is another driver's and older
    than the job (a driver started later by hand, in a terminal, beats without a job and is newer)."""
    if beat is None:
        return True
    return beat.job != job.job_id and beat.at < (job.started_at or 0.0)


class WatchState:
    """What the watch did to a run (runs/<run>/watch.json): restarts made, notices sent (each is sent once)."""

    def __init__(self, run: RunDir) -> None:
        self._path = run.root / "watch.json"
        try:
            self._data = json.loads(self._path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            self._data = {"restarts": 0, "notified": []}

    @property
    def restarts(self) -> int:
        return int(self._data.get("restarts", 0))

    def restarted(self) -> None:
        self._data["restarts"] = self.restarts + 1
        self._save()

    def first_time(self, key: str) -> bool:
        """True the first time `key` is asked about (then it is remembered)."""
        seen: list[str] = self._data.setdefault("notified", [])
        if key in seen:
            return False
        seen.append(key)
        self._save()
        return True

    def _save(self) -> None:
        write_private(self._path, json.dumps(self._data, indent=2) + "\n")


Say = Callable[[str], None]


@dataclass(frozen=True)
class Watcher:
    """Acts on one run at a time; `notify_command` (else the run's policy's) hears what needs a person."""

    say: Say
    notify_command: str | None = None
    max_restarts: int = MAX_RESTARTS

    def tend(self, run: RunDir) -> Assessment:
        """Look at the run once and do what its condition needs; the assessment it acted on."""
        with _watch_lock(run) as held:
            if not held:
                return Assessment(Condition.ALIVE, None, None, "another eyas watch is acting on it")
            found = assess(run, time.time())
            state = WatchState(run)
            if found.condition is Condition.FROZEN:
                self._stop_frozen(run, found, state)
            elif found.condition is Condition.DIED and not self._restart(run, found, state):
                return Assessment(Condition.GIVEN_UP, found.beat, found.driver, found.detail)
            elif found.condition in (Condition.NEVER_STARTED, Condition.ENDED):
                self._report_end(run, found, state)
            return found

    def _report_end(self, run: RunDir, found: Assessment, state: WatchState) -> None:
        """A driver that never drove the run, or that ended with an error, is told of once and not restarted:
        starting it again would meet the same cause."""
        again = f"Fix the cause, then `eyas resume --detach {run.run_id}`."
        if found.condition is Condition.NEVER_STARTED and state.first_time(f"never:{found.driver_id}"):
            log = driver_log(found.driver) if found.driver is not None else None
            self._tell(run, f"the driver of run {run.run_id} ({found.detail}) ended before it drove the run; it "
                            f"is not restarted. Its log: {log}. {again}")  # fmt: skip
        beat = found.beat
        if (
            found.condition is Condition.ENDED
            and beat is not None
            and beat.failed
            and state.first_time(f"failed:{beat.at}")
        ):
            self._tell(run, f"the driver of run {run.run_id} stopped with an error, so it is not restarted: "
                            f"{found.detail}. {again}")  # fmt: skip

    def _restart(self, run: RunDir, found: Assessment, state: WatchState) -> bool:
        """Resume the run as a new detached driver; False when it has had the most restarts already."""
        if state.restarts >= self.max_restarts:
            if state.first_time(f"limit:{state.restarts}"):
                self._tell(run, f"the driver of run {run.run_id} died again ({found.detail}) after {state.restarts} "
                                f"restarts, the most eyas watch makes; resume it by hand: `eyas resume --detach "
                                f"{run.run_id}`.")  # fmt: skip
            return False
        started = start_driver(run, ["resume", run.run_id])
        state.restarted()
        self._tell(run, f"the driver of run {run.run_id} stopped beating ({found.detail}); restarted it as "
                        f"{started.job_id}{started.pid_text}, restart {state.restarts} of at most "
                        f"{self.max_restarts}. Log: {driver_log(started)}")  # fmt: skip
        return True

    def _stop_frozen(self, run: RunDir, found: Assessment, state: WatchState) -> None:
        job, beat = found.driver, found.beat
        ours = job is not None and beat is not None and beat.job == job.job_id and job.status is JobStatus.RUNNING
        if ours and job is not None:
            driver_jobs(run).cancel(job.job_id)
            self._tell(run, f"the driver of run {run.run_id} is frozen ({found.detail}); stopped its job "
                            f"{job.job_id}, it is restarted on the next look.")  # fmt: skip
        elif beat is not None and state.first_time(f"frozen:{beat.pid}:{beat.at}"):
            self._tell(run, f"the driver of run {run.run_id} (pid {beat.pid}, not started by eyas) is frozen "
                            f"({found.detail}); stop it, and eyas watch restarts the run.")  # fmt: skip

    def _tell(self, run: RunDir, message: str) -> None:
        text = Redactor().text(f"eyas watch: {message}")
        self.say(text)
        send_notice(self.notify_command or run_notify_command(run), text, {"EYAS_RUN": run.run_id})


def run_notify_command(run: RunDir) -> str | None:
    try:
        policy = run.meta().get("policy") or {}
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    command = policy.get("notify_command")
    return str(command) if command else None


@contextmanager
def _watch_lock(run: RunDir) -> Iterator[bool]:
    """Held while one watcher decides and acts on the run (True); another watcher skips the run meanwhile (False)."""
    with open_private(run.root / "watch.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # closing the file lets go of the lock


def driver_facts(run: RunDir, now: float) -> dict[str, Any] | None:
    """What `eyas status` shows of the run's driver: its condition, heartbeat age, job and log, restarts made by
    the watch, and since when the host has been unreachable; None for a run no beating eyas ever drove."""
    found = assess(run, now)
    if found.condition is Condition.UNWATCHED:
        return None
    beat, job = found.beat, found.driver
    since = beat.host_unreachable_since if beat is not None and beat.driving else None
    return {
        "condition": found.condition.value,
        "detail": found.detail,
        "heartbeat_age_s": round(beat.age_s(now), 1) if beat is not None else None,
        "stale_after_s": beat.stale_after_s if beat is not None else None,
        "pid": beat.pid if beat is not None else None,
        "job": job.job_id if job is not None else None,
        "job_state": driver_job_state(job) if job is not None else None,
        "failed": beat.failed if beat is not None else False,
        "log": str(driver_log(job)) if job is not None else None,
        "restarts": WatchState(run).restarts,
        "host": beat.host if beat is not None else None,
        "host_unreachable_since": stamp(since) if since is not None else None,
    }


# A driver runs `eyas run` or `eyas resume`: these statuses are endings of the run, not failures of the driver.
_DRIVER_ENDINGS: dict[int, str] = {
    ExitCode.GATE: "stopped at a gate",
    ExitCode.ROLLED_BACK: "ended: the drafter was rolled back",
}


def driver_job_state(job: JobState) -> str:
    """A driver job's state in words; one that stopped at a gate or saw a rollback did its job (exit 1 stays a
    failure: an uncaught error exits 1 too)."""
    ending = _DRIVER_ENDINGS.get(job.rc or 0) if job.status is JobStatus.FAILED else None
    return f"{ending} (exit {job.rc})" if ending else job.describe()


def driver_phrase(facts: dict[str, Any] | None) -> str:
    """`driver_facts` in a few words for a runs list (`eyas runs`, the dashboard): empty for a run no beating eyas
    drove; otherwise its condition, and the host outage it waits out."""
    if facts is None:
        return ""
    phrase = str(facts["condition"])
    if facts["condition"] == Condition.ALIVE and facts["heartbeat_age_s"] is not None:
        phrase += f", beat {facts['heartbeat_age_s']:.0f} s ago"
    elif facts["condition"] != Condition.ENDED or facts["failed"]:  # an ending's words: the run's own state
        phrase += f": {facts['detail']}"
    if facts["restarts"]:
        phrase += f"; restarted {facts['restarts']}x by eyas watch"
    if facts["host_unreachable_since"]:
        phrase += f"; host {facts['host']} unreachable since {facts['host_unreachable_since']}"
    return phrase


def runs_listing(root: Path | None, now: float) -> list[dict[str, Any]]:
    """Each run in the runs folder (`root`, else the default) as `eyas runs` and the dashboard list it: phase, where
    it stands, its driver's facts and its report (None when there is none); a run that cannot be read is listed as
    damaged, with the file at fault and the fix, and never hides the others."""
    rows = []
    for run in list_runs(root):
        listed = read_undamaged(run, lambda readable: _listed(readable, now))
        if isinstance(listed, Damage):
            listed = {"run": run.run_id, "phase": "", "state": "damaged", "damage": listed.text(), "driver": None,
                      "report": None, "outcome": None, "waiting_at": None,
                      "changed": run.last_change()}  # fmt: skip
        rows.append(listed)
    return rows


def _listed(run: RunDir, now: float) -> dict[str, Any]:
    from eyas.graph.life.run_view import read_run, run_condition
    from eyas.graph.life.stored_outcome import known_state, stored_outcome
    from eyas.graph.run_facts import run_facts

    view = read_run(run)
    report = str(run.report) if run.report.exists() else None
    state = known_state(run, view)
    outcome = stored_outcome(run, state)
    waiting = view.pending[1] if view.pending else None
    return {"run": run.run_id, "phase": run_facts(state).phase or "", "state": run_condition(run, view),
            "damage": None, "driver": driver_facts(run, now), "report": report,
            "outcome": outcome.model_dump(mode="json") if outcome else None, "waiting_at": waiting,
            "changed": run.last_change()}  # fmt: skip
