"""Detached jobs: long work on a host that outlives the SSH session and eyas itself.

Each job is a directory `<workdir>/jobs/<job_id>/` (only its owner may enter it) holding the wrapper script
`run.sh`, its `log`, the wrapper's `pid` (and the process start time, so a recycled pid is not mistaken for
the job), `rc` once it ended, and `secrets.env` when the job needs secrets: those travel by file (SFTP), never
on a command line, where every user of the host sees them in `ps`. Claiming the directory with mkdir is
atomic, so launching the same job id twice, from a resumed controller or two at once, starts one process.
A job runs under umask 077, so what it makes on the host (a run's data, hidden states, drafter) is its owner's.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from enum import StrEnum

from pydantic import BaseModel, Field, field_validator, model_validator

from eyas.tools.errors import JobError
from eyas.tools.hosts.host import Host
from eyas.tools.recording.redact import harmless_env

_PID_GRACE_S = 60
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRETS_FILE = "secrets.env"
STARTED = "eyas: started"  # the wrapper's log line once it has read secrets.env and runs the program
ENDED = "eyas: job ended with exit code"  # the wrapper's last log line, with the program's exit code


class JobStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"  # the process is gone and left no exit code (killed with SIGKILL, host rebooted)
    ABSENT = "absent"  # never launched


class JobSpec(BaseModel):
    """What to run: argv[0] is resolved on the host at launch, env is set explicitly."""

    job_id: str
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, str] = Field(
        default_factory=dict, description="environment no one else may see: a file only the owner reads"
    )
    cwd: str | None = None

    @field_validator("env", "secrets")
    @classmethod
    def _env_names_are_shell_names(cls, env: dict[str, str]) -> dict[str, str]:
        # Names go into `export NAME=...` unquoted (values are quoted), so only shell names are allowed.
        bad = sorted(name for name in env if not _ENV_NAME.match(name))
        if bad:
            raise ValueError(f"environment variable names must be letters, digits and '_', not {bad}")
        return env

    @model_validator(mode="after")
    def _secret_looking_env_is_secret(self) -> JobSpec:
        """Whatever is not known harmless travels as a secret (by file, never in run.sh, job.json or a command line):
        a production unit's Environment= may hold an AZURE_OPENAI_KEY or a presigned URL whose name says nothing."""
        hidden = {name: value for name, value in self.env.items() if not harmless_env(name, value)}
        if hidden:
            self.env = {name: value for name, value in self.env.items() if name not in hidden}
            self.secrets = {**self.secrets, **hidden}
        return self


class JobState(BaseModel):
    job_id: str
    host: str
    status: JobStatus
    pid: int | None = None
    rc: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    directory: str

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.LOST)

    def describe(self) -> str:
        if self.status is JobStatus.FAILED:
            return f"failed (exit {self.rc})"
        return self.status.value

    @property
    def pid_text(self) -> str:
        """' (pid 4242)' to follow a job's name, or nothing where no pid is known (a Ray job, one not started)."""
        return f" (pid {self.pid})" if self.pid is not None else ""


def last_words(tail: str) -> str | None:
    """The last line of a job's log that says why it ended: the wrapper's closing line (the exit code, which the
    job's status already gives) is passed over, so a workload's own refusal or a traceback's error is found."""
    lines = [line.strip() for line in tail.splitlines() if line.strip() and not line.startswith(ENDED)]
    return lines[-1] if lines else None


def wrapper_script(spec: JobSpec, directory: str) -> str:
    """The shell script that runs one job; every argument is quoted, nothing depends on a login profile."""
    q = shlex.quote
    program = q(spec.argv[0])
    job_dir = q(directory)
    lines = [
        "#!/bin/sh",
        f"# eyas job {spec.job_id}. Running this script by hand reproduces the job.",
        # What the job makes (the run's data, hidden states, checkpoints, a server's log) is its owner's alone:
        # the workloads create their files and folders with the default modes, which this makes 0600 and 0700.
        "umask 077",
        f"cd {job_dir} || exit 1",
        "echo $$ > pid.tmp",
        "awk '{print $22}' /proc/$$/stat > starttime 2>/dev/null",
        "mv pid.tmp pid",
        # The wrapper outlives a SIGTERM to its group, so it can record the command's exit code.
        "trap 'echo \"eyas: job received a stop signal\"' TERM INT HUP",
        # Absolute paths: by the time it ends, the job has changed to its own cwd.
        f'finish() {{ echo "$1" > {job_dir}/rc.tmp && mv {job_dir}/rc.tmp {job_dir}/rc; '
        f'echo "{ENDED} $1"; exit "$1"; }}',
    ]
    # The job's environment first, so the program is looked up with the PATH it will run with; the
    # wrapper sets no shell variables of its own that an environment entry could replace.
    lines += [f"export {name}={q(value)}" for name, value in sorted(spec.env.items())]
    if spec.secrets:
        secrets = q(f"{directory}/{SECRETS_FILE}")
        lines.append(f"[ -r {secrets} ] && . {secrets} || {{ echo 'eyas: {SECRETS_FILE} is missing'; finish 126; }}")
    lines += [
        f"command -v {program} > /dev/null || {{",
        f"  printf '%s (PATH: %s). %s\\n' {q(f'eyas: {spec.argv[0]!r} is not found by a non-interactive shell')}"
        f' "$PATH" {q("Give its absolute path, e.g. in the bin directory of the ML venv.")}',
        "  finish 127",
        "}",
        f'echo "{STARTED} $(date -u +%Y-%m-%dT%H:%M:%SZ) running $(command -v {program})"',
    ]
    if spec.cwd:
        lines.append(f"cd {q(spec.cwd)} || finish 126")
    lines.append(" ".join([program, *(q(arg) for arg in spec.argv[1:])]))
    lines.append('finish "$?"')
    return "\n".join(lines) + "\n"


def secrets_file(secrets: dict[str, str]) -> str:
    """secrets.env: sourced by run.sh, so the values reach the job's environment and no command line."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in sorted(secrets.items()))


# Prints one line per job directory: name pid rc alive started finished dir-age (`-` for missing values).
_STATUS_SCRIPT = r"""
for d in "$@"; do
  if [ ! -d "$d" ]; then echo "$(basename "$d") absent"; continue; fi
  pid=$(cat "$d/pid" 2>/dev/null); st=$(cat "$d/starttime" 2>/dev/null)
  alive=0
  if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
    set -- $(awk '{print $3, $22}' "/proc/$pid/stat")
    [ "$1" != Z ] && [ "$2" = "$st" ] && alive=1
  elif [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then alive=1; fi
  # rc only after the liveness check: the wrapper writes rc, then exits, so read the other way round
  # a job that just ended would look lost.
  rc=$(cat "$d/rc" 2>/dev/null)
  s=$(stat -c %Y "$d/pid" 2>/dev/null); f=$(stat -c %Y "$d/rc" 2>/dev/null)
  age=$(( $(date +%s) - $(stat -c %Y "$d") ))
  echo "$(basename "$d") present ${pid:--} ${rc:--} $alive ${s:--} ${f:--} $age"
done
"""


class Jobs:
    """The jobs of one work directory on one host."""

    def __init__(self, host: Host, workdir: str) -> None:
        self.host = host
        self.root = f"{workdir.rstrip('/')}/jobs"

    def directory(self, job_id: str) -> str:
        if not _JOB_ID.match(job_id):
            raise JobError(f"Invalid job id {job_id!r}: use letters, digits, '.', '_' and '-' (at most 128).")
        return f"{self.root}/{job_id}"

    def launch(self, spec: JobSpec) -> JobState:
        """Start the job unless its directory exists; then it only reports the existing job's state."""
        directory = self.directory(spec.job_id)
        q = shlex.quote
        script = base64.b64encode(wrapper_script(spec, directory).encode()).decode()
        # job.json names the secrets; their values are only in secrets.env.
        meta = {**spec.model_dump(exclude={"secrets"}), "secrets": sorted(spec.secrets)}
        encoded_meta = base64.b64encode(json.dumps(meta).encode()).decode()
        prepare = (
            f"cd {q(directory)} && echo {script} | base64 -d > run.sh && chmod 700 run.sh && "
            f"(umask 077 && echo {encoded_meta} | base64 -d > job.json)"
        )
        start = f"cd {q(directory)} && umask 077 && setsid /bin/sh ./run.sh < /dev/null >> log 2>&1 & "
        # Wait (briefly, on the host) until the wrapper recorded its pid, so status is never ambiguous;
        # also when another launcher of the same id created the directory a moment ago.
        wait = f"i=0; while [ ! -s {q(directory)}/pid ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
        if not spec.secrets:
            self._claim(spec.job_id, f"{prepare} && {start}", wait)
        elif self._claim(spec.job_id, f"{prepare} || exit 1; ", "") == "launched":
            # Claimed and prepared, not started: the secrets go in by file first. A controller that dies here
            # leaves a job that never wrote its pid, which status reports as lost after the grace period.
            self.host.write_text(f"{directory}/{SECRETS_FILE}", secrets_file(spec.secrets), mode=0o600)
            self.host.run(start + wait, timeout=60).check(f"Starting job {spec.job_id}")
        return self.status(spec.job_id)

    def _claim(self, job_id: str, then: str, wait: str) -> str:
        """Create the job's directory (owner only) and run `then` in it when this call created it; the outcome."""
        q = shlex.quote
        directory = self.directory(job_id)
        command = (
            # Owner-only, all of it: the jobs folder and the job's.
            f"umask 077; mkdir -p {q(self.root)} || exit 1; if mkdir {q(directory)} 2>/dev/null; then "
            f'{then}outcome=launched; else outcome=exists; fi; {wait}echo "$outcome"'
        )
        return self.host.run(command, timeout=60).check(f"Launching job {job_id}").stdout.strip()

    def statuses(self, job_ids: list[str]) -> list[JobState]:
        if not job_ids:
            return []
        dirs = " ".join(shlex.quote(self.directory(job_id)) for job_id in job_ids)
        result = self.host.run(f"sh -c {shlex.quote(_STATUS_SCRIPT)} status {dirs}", timeout=30)
        result.check("Reading job status")
        states = {}
        for line in result.stdout.splitlines():
            fields = line.split()
            states[fields[0]] = self._parse_status(fields)
        return [states[job_id] for job_id in job_ids]

    def status(self, job_id: str) -> JobState:
        return self.statuses([job_id])[0]

    def _parse_status(self, fields: list[str]) -> JobState:
        job_id = fields[0]
        if fields[1] == "absent":
            return JobState(
                job_id=job_id, host=self.host.name, status=JobStatus.ABSENT, directory=self.directory(job_id)
            )
        pid, rc, alive, started, finished, age = (None if value == "-" else value for value in fields[2:8])
        rc_value = int(rc) if rc is not None else None
        if rc_value is not None:
            status = JobStatus.SUCCEEDED if rc_value == 0 else JobStatus.FAILED
        elif alive == "1" or (pid is None and int(age or 0) < _PID_GRACE_S):
            # No pid yet means the launcher is still between mkdir and the wrapper's first line; a wrapper
            # that never wrote its pid within the grace period never started.
            status = JobStatus.RUNNING
        else:
            status = JobStatus.LOST
        return JobState(
            job_id=job_id,
            host=self.host.name,
            status=status,
            pid=int(pid) if pid else None,
            rc=rc_value,
            started_at=float(started) if started else None,
            finished_at=float(finished) if finished else None,
            directory=self.directory(job_id),
        )

    def list(self) -> list[JobState]:
        result = self.host.run(f"ls -1 {shlex.quote(self.root)} 2>/dev/null", timeout=30)
        return self.statuses(sorted(name for name in result.stdout.split() if _JOB_ID.match(name)))

    def tail(self, job_id: str, lines: int = 50) -> str:
        log = f"{self.directory(job_id)}/log"
        return self.host.run(f"tail -n {int(lines)} {shlex.quote(log)} 2>/dev/null", timeout=30).stdout

    def cancel(self, job_id: str, grace_s: float = 10.0) -> JobState:
        """Stop the job's whole process group: SIGTERM, then SIGKILL after the grace period."""
        state = self.status(job_id)
        if state.status is not JobStatus.RUNNING or state.pid is None:
            return state
        directory = shlex.quote(self.directory(job_id))
        ticks = max(1, int(grace_s / 0.1))
        group = f"-{state.pid}"
        command = (
            f"kill -TERM {group} 2>/dev/null; i=0; "
            f"while [ ! -e {directory}/rc ] && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done; "
            # Whatever of the group is left after the grace period (or after the wrapper ended) is killed,
            # so no child is orphaned on the host.
            f"kill -KILL {group} 2>/dev/null; [ -e {directory}/rc ] || echo 137 > {directory}/rc"
        )
        self.host.run(command, timeout=grace_s + 30).check(f"Cancelling job {job_id}")
        return self.status(job_id)

    def drop_secrets(self, job_id: str) -> bool:
        """Remove the job's secrets.env once its wrapper has read it (its log says STARTED) or it ended: the values
        then live only in the running process's environment. Whether the file is gone."""
        directory = shlex.quote(self.directory(job_id))
        read = f"grep -q {shlex.quote(STARTED)} {directory}/log 2>/dev/null || [ -e {directory}/rc ]"
        command = f"if {read}; then rm -f -- {directory}/{SECRETS_FILE} && echo dropped; fi"
        return (
            self.host.run(command, timeout=30).check(f"Removing the secrets of job {job_id}").stdout.strip()
            == "dropped"
        )

    def forget(self, job_id: str) -> None:
        """Remove a finished job's directory, so the same id can be launched afresh."""
        state = self.status(job_id)
        if state.status is JobStatus.RUNNING:
            raise JobError(f"Job {job_id} is still running on {self.host.name}; cancel it before forgetting it.")
        self.host.run(f"rm -rf -- {shlex.quote(self.directory(job_id))}", timeout=60).check(f"Removing job {job_id}")
