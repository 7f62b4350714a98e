"""Publishing a drafter to a Hugging Face hub: publish.py on the host where the drafter was trained.

The control plane has no huggingface_hub; the host's ML environment has it, and the drafter is there. The check
before the upload (publish.py --dry-run: the repo id, offline, the folder, where the token comes from, the files) is
a plain command that contacts no hub and ends in seconds. The upload itself is a detached job, not a command eyas
waits on: a drafter of several GB takes minutes to hours over a host's uplink, and a job outlives a dropped SSH
connection or a closed laptop, logs what it did, records its exit code and prints a progress line after each file,
which eyas follows. A job also takes its secrets by an owner-only file, so the hub token never rides on a command
line, and eyas removes that file as soon as the job has read it. The job runs on the target's host as a detached
job whatever the run's executor, since that is where the drafter's folder is.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from eyas.tools.errors import EyasError, NotFound
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState, JobStatus
from eyas.tools.jobs.request import job_env, workload_job
from eyas.tools.settings.config import HostConfig, secret
from eyas.tools.workloads.progress import TAG
from eyas.tools.workloads.publish import NO_DRAFTER

SCRIPT = "publish.py"
CHECK_TIMEOUT_S = 120.0  # the dry run: imports huggingface_hub and lists a folder, nothing more
FIRST_POLL_S, LAST_POLL_S = 0.2, 5.0  # the upload job's polls: quick at first (a small drafter), then every 5 s
LOG_LINES = 1000  # all of an upload's log: a few lines per file, and a drafter has a handful of files


class NoDrafter(NotFound):
    """The run has no drafter (yet) to publish."""


class PublishedFile(BaseModel):
    path: str
    bytes: int


class Publication(BaseModel):
    """What publish.py checked (a dry run) or did: the files, where they go, and where the token comes from."""

    model_config = ConfigDict(extra="ignore")

    repo: str
    endpoint: str
    folder: str
    token: str
    files: list[PublishedFile]
    bytes: int
    url: str | None = None
    commit: str | None = None
    commit_url: str | None = None


def publish_flags(folder: str, repo: str, private: bool, message: str, token_env: str | None) -> list[str]:
    flags = ["--folder", folder, "--repo", repo, "--message", message]
    return flags + (["--private"] if private else []) + (["--token-env", token_env] if token_env else [])


def token_secrets(host_config: HostConfig) -> dict[str, str]:
    """The token eyas sends (by the job's owner-only file), or none: the host's own is used. A variable the config
    names but this environment lacks is an error, said before anything runs."""
    name = host_config.hub_token_env
    if name is None:
        return {}
    value = secret(name)
    if not value:
        raise EyasError(
            f"The config's hub_token_env names {name}, which is not set here: export {name} (a hub token with write "
            "access) before `eyas publish`, or remove hub_token_env to use the host's own HF_TOKEN."
        )
    return {name: value}


def check(host: Host, host_config: HostConfig, workloads: str, flags: list[str]) -> Publication:
    """publish.py --dry-run on the host, in the environment its job would have: what would be uploaded, or its
    refusal as an error (NoDrafter for a folder without a drafter)."""
    env = [f"{name}={value}" for name, value in sorted(job_env(host_config).items())]
    command = shlex.join(["env", *env, host_config.python, f"{workloads}/{SCRIPT}", *flags, "--dry-run"])
    result = host.run(command, timeout=CHECK_TIMEOUT_S)
    if not result.ok:
        raise refusal(result.rc, result.stderr or result.stdout)
    return Publication.model_validate_json(result.stdout.strip().splitlines()[-1])


def refusal(rc: int, output: str) -> EyasError:
    """publish.py's own paragraph (its last `publish.py:` line), as the error its exit code says."""
    said = [line.removeprefix("publish.py: ") for line in output.splitlines() if line.startswith("publish.py: ")]
    tail = output.strip().splitlines()[-1:] or ["no output"]
    message = said[-1] if said else f"publish.py failed (exit {rc}): {tail[0][:300]}"
    return NoDrafter(message) if rc == NO_DRAFTER else EyasError(message)


def publish_spec(job_id: str, host_config: HostConfig, workloads: str, flags: list[str]) -> JobSpec:
    return workload_job(job_id, host_config, workloads, SCRIPT, flags, secrets=token_secrets(host_config))


def launch_once(jobs: Jobs, spec: JobSpec) -> JobState:
    """Start the upload; an earlier one that ended is forgotten first, one still running is an error."""
    earlier = jobs.status(spec.job_id)
    if earlier.status is JobStatus.RUNNING:
        raise EyasError(
            f"An upload of this run is running already (job {spec.job_id} on {jobs.host.name}): follow it with "
            f"`eyas jobs tail {spec.job_id}`, or stop it with `eyas jobs cancel {spec.job_id}` and publish again."
        )
    if earlier.status is not JobStatus.ABSENT:
        jobs.forget(spec.job_id)
    return jobs.launch(spec)


def progress_lines(log: str) -> list[dict[str, Any]]:
    """Every progress line of publish.py's log, in order (a torn last line is left for the next poll)."""
    found = []
    for line in log.splitlines():
        if line.startswith(TAG):
            try:
                found.append(json.loads(line[len(TAG) :]))
            except json.JSONDecodeError:
                break
    return found


def follow(jobs: Jobs, job_id: str, on_progress: Callable[[dict[str, Any]], None]) -> Publication:
    """Poll the upload until it ends, `on_progress` with each new progress line; its secrets file goes as soon as the
    job has read it. Returns what it uploaded, or raises its refusal."""
    secrets_left, shown, wait = True, 0, FIRST_POLL_S
    while True:
        state = jobs.status(job_id)
        if secrets_left:
            secrets_left = not jobs.drop_secrets(job_id)
        log = jobs.tail(job_id, LOG_LINES)
        lines = progress_lines(log)
        for line in lines[shown:]:
            on_progress(line)
        shown = len(lines)
        if state.finished:
            break
        time.sleep(wait)
        wait = min(LAST_POLL_S, wait * 2)
    if state.rc is None:
        raise EyasError(
            f"The upload job {job_id} on {jobs.host.name} vanished without an exit code (killed, or the host "
            "rebooted): publish again; the hub skips the large files it holds already."
        )
    if state.status is not JobStatus.SUCCEEDED:
        raise refusal(state.rc, log)
    results = [line for line in log.splitlines() if line.startswith("{")]
    return Publication.model_validate(json.loads(results[-1]))
