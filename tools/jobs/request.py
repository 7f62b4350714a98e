"""What every phase job has in common: a workload script run by the host's ML interpreter.

The program is the ML environment's absolute interpreter path (a non-interactive shell's PATH may not
find a venv), the script is one that `upload_workloads` put on the host, and every path is absolute
there. The job wrapper quotes each argument, so argv values need no quoting here.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.settings.config import HostConfig

# Workloads print progress lines as they go; unbuffered output keeps the job log current.
JOB_ENV = {"PYTHONUNBUFFERED": "1"}
# On a host that must not reach the hub (HostConfig.hub_offline), huggingface_hub is told so, and a hub drafter is
# refused by download.py at once, naming the setting, instead of timing out on the network.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1"}


def job_env(host: HostConfig) -> dict[str, str]:
    """The environment every job on `host` starts with: the hub it may reach (HostConfig.hub_endpoint), or none."""
    hub = {"HF_ENDPOINT": host.hub_endpoint} if host.hub_endpoint else {}
    return {**JOB_ENV, **(OFFLINE_ENV if host.hub_offline else hub)}


class JobRequest(BaseModel):
    """The base of every phase's request: immutable, and a typo in a field name is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def workload_job(
    job_id: str,
    host: HostConfig,
    workloads_dir: str,
    script: str,
    flags: list[str],
    *,
    env: dict[str, str] | None = None,
    secrets: dict[str, str] | None = None,
    cwd: str | None = None,
) -> JobSpec:
    """`<host python> <workloads_dir>/<script> <flags>` with the common environment (job_env) plus `env`, and
    `secrets` by file (see JobSpec)."""
    if not posixpath.isabs(workloads_dir):
        raise ValueError(f"the workloads directory must be absolute on the host, got {workloads_dir!r}")
    argv = [host.python, posixpath.join(workloads_dir, script), *flags]
    return JobSpec(job_id=job_id, argv=argv, env={**job_env(host), **(env or {})}, secrets=secrets or {}, cwd=cwd)


def optional_flags(values: dict[str, object | None]) -> list[str]:
    """`--flag value` for each value that is set; None leaves the script's default."""
    return [item for flag, value in values.items() if value is not None for item in (flag, str(value))]


def fan_out(job_id: str, count: int, make: Callable[[str, int], JobSpec]) -> list[JobSpec]:
    """One job named `job_id`, or `count` jobs named `<job_id>-<i>` (a phase's shards or nodes): `make(id, i)`."""
    if count == 1:
        return [make(job_id, 0)]
    return [make(f"{job_id}-{i}", i) for i in range(count)]


def remote_code_flag(trust_remote_code: bool) -> list[str]:
    """The workloads' flag for a target that runs its own code (see tools/workloads/target_model.py)."""
    return ["--trust-remote-code"] if trust_remote_code else []
