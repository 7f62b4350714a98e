"""Where a run's jobs execute: detached jobs on the target's host (the default), or Ray jobs on a cluster.

Both give the same states (running, succeeded, failed with its exit code, lost, absent), logs, cancel and
idempotency by job id, so the phases and the monitor never ask which one runs their jobs. Ray is imported only
when a config asks for it (`pip install eyas[ray]`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState

if TYPE_CHECKING:  # names in annotations only: `eyas status` and `eyas runs` import this without the config's models
    from eyas.tools.recording.boundary import Boundary
    from eyas.tools.settings.config import EyasConfig


class JobExecutor(Protocol):
    """What the phases, the monitor and the boundary need of an engine that runs jobs."""

    host: Host  # where the job's records (and its secrets file) live

    def launch(self, spec: JobSpec) -> JobState: ...

    def statuses(self, job_ids: list[str]) -> list[JobState]: ...

    def status(self, job_id: str) -> JobState: ...

    def list(self) -> list[JobState]: ...

    def tail(self, job_id: str, lines: int = 50) -> str: ...

    def cancel(self, job_id: str, grace_s: float = 10.0) -> JobState: ...

    def forget(self, job_id: str) -> None: ...


def executor_for(config: EyasConfig, host: Host) -> JobExecutor:
    """The executor the config chooses; jobs' records live in the target host's work directory."""
    workdir = config.host().workdir
    if config.cluster.executor == "detached":
        return Jobs(host, workdir)
    from eyas.tools.jobs.ray_jobs import RayJobs  # only here: ray is an optional extra

    return RayJobs(host, workdir, config.cluster)


def jobs_of(config: EyasConfig, host_name: str | None, host: Host) -> JobExecutor:
    """The jobs a face (`eyas jobs`, `eyas status`, the chat's job tools) shows for a configured host (None: the
    target's): the run's executor for the target host, so that Ray jobs are seen where the run launched them, and
    the detached jobs of any other host. Faces call this rather than building `Jobs` themselves."""
    name = host_name or config.target.host
    if name == config.target.host:
        return executor_for(config, host)
    return Jobs(host, config.host(name).workdir)


def launch_noted(boundary: Boundary, jobs: JobExecutor, spec: JobSpec) -> JobState:
    """Launch a job (a detached job's commands cross the host as usual) and note the launch and its state on the
    run's boundary, so that a replay checks that the same job was launched with the same argv."""
    state = jobs.launch(spec)
    boundary.note(
        "job_launch",
        {
            "host": jobs.host.name,
            "job_id": spec.job_id,
            "argv": spec.argv,
            "env": spec.env,
            "cwd": spec.cwd,
            "state": state.model_dump(mode="json"),
        },
    )
    return state
