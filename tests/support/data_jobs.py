"""Launching the data phase's jobs outside the graph, as its launch node (and, for the drafter's download, the
preparation before the data gate) does: upload, then one launch each."""

from __future__ import annotations

from typing import Any

from eyas.graph.phases.data.jobs import GenerationSettings, download_spec, generation_spec
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import Jobs, JobState
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.launch.api_key import configured_key
from eyas.tools.settings.config import HostConfig, TargetConfig
from eyas.tools.settings.sizes import PROMPT_SET
from eyas.tools.workloads.progress import last_progress


def upload_prompt_set(host: Host, workdir: str) -> str:
    """The shipped prompt set, copied to `<workdir>/data/prompts.jsonl` on the host; returns that path."""
    remote = f"{workdir.rstrip('/')}/data/prompts.jsonl"
    host.write_bytes(remote, PROMPT_SET.read_bytes())
    return remote


def launch_data_jobs(
    host: Host,
    host_config: HostConfig,
    target: TargetConfig,
    *,
    run_id: str,
    generation: GenerationSettings,
    drafter: str | None = None,
) -> dict[str, JobState]:
    """Generation, and the drafter download beside it when one is named; job states by role."""
    workloads = upload_workloads(host, host_config.workdir)
    key = configured_key(target)
    specs = {"generate": generation_spec(f"{run_id}-generate", host_config, target, workloads, generation, key)}
    if drafter:
        out = f"{host_config.workdir.rstrip('/')}/drafters/{drafter.replace('/', '--')}"
        specs["download"] = download_spec(f"{run_id}-download", host_config, workloads, drafter, out)
    jobs = Jobs(host, host_config.workdir)
    return {role: jobs.launch(spec) for role, spec in specs.items()}


def job_progress(jobs: Jobs, job_id: str, lines: int = 100) -> dict[str, Any] | None:
    """The newest progress line in the job's log, or None when it printed none yet."""
    return last_progress(jobs.tail(job_id, lines))
