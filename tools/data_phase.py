"""The data phase on the host: synthetic generation and the drafter download, as detached jobs side by side.

Both run with the ML environment's absolute interpreter path (HostConfig.python): a bare `python` in a
detached job finds whatever a non-interactive PATH holds, which is rarely the venv with vLLM. Launching is
idempotent by job id (tools/jobs.py), so a resumed controller re-attaches instead of starting twice; a
generation job that was killed is launched again under a new id (or after `forget`) and resumes from its
output file.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from eyas.tools.config import HostConfig, TargetConfig, secret
from eyas.tools.estimate import format_hours, format_size
from eyas.tools.host import Host
from eyas.tools.jobs import Jobs, JobSpec, JobState
from eyas.tools.workloads import upload_workloads
from eyas.tools.workloads.progress import last_progress

PROMPT_SET = Path(__file__).resolve().parent / "data" / "prompts.jsonl"


class GenerationSettings(BaseModel):
    """generate.py's options that a run chooses; the rest keep the script's defaults."""

    input: str = Field(description="prompts JSONL on the host")
    output: str = Field(description="generated JSONL on the host (appended to, resumed from)")
    base_url: str | None = Field(None, description="the server as the HOST reaches it; default target.base_url")
    concurrency: int = Field(64, ge=1)
    max_tokens: int = Field(2048, ge=1, description="longest answer per turn")
    temperature: float | None = None
    limit: int | None = Field(None, ge=1)
    progress_every: float = Field(10.0, gt=0)


def upload_prompt_set(host: Host, workdir: str) -> str:
    """The shipped prompt set, copied to `<workdir>/data/prompts.jsonl` on the host; returns that path."""
    remote = f"{workdir.rstrip('/')}/data/prompts.jsonl"
    host.write_bytes(remote, PROMPT_SET.read_bytes())
    return remote


def generation_spec(
    job_id: str, host_config: HostConfig, target: TargetConfig, workloads: str, settings: GenerationSettings
) -> JobSpec:
    argv = [
        host_config.python, f"{workloads}/generate.py",
        "--input", settings.input, "--output", settings.output,
        "--base-url", settings.base_url or target.base_url, "--model", target.model,
        "--concurrency", str(settings.concurrency), "--max-tokens", str(settings.max_tokens),
        "--progress-every", str(settings.progress_every),
    ]  # fmt: skip
    if settings.temperature is not None:
        argv += ["--temperature", str(settings.temperature)]
    if settings.limit is not None:
        argv += ["--limit", str(settings.limit)]
    env = {"PYTHONUNBUFFERED": "1"}
    key = secret(target.api_key_env)
    if target.api_key_env and key:
        # The job reads the key from its environment, so it is stored in the job's directory on the host.
        argv += ["--api-key-env", target.api_key_env]
        env[target.api_key_env] = key
    return JobSpec(job_id=job_id, argv=argv, env=env, cwd=host_config.workdir)


def download_spec(job_id: str, host_config: HostConfig, workloads: str, source: str, out: str) -> JobSpec:
    """`source` is a hub repo id (downloaded into `out`) or a directory on the host (validated, used as is)."""
    argv = [host_config.python, f"{workloads}/download.py", "--source", source, "--out", out]
    return JobSpec(job_id=job_id, argv=argv, env={"PYTHONUNBUFFERED": "1"}, cwd=host_config.workdir)


def launch_all(jobs: Jobs, specs: list[JobSpec]) -> list[JobState]:
    """Launch independent jobs at once (each launch is one host command; over SSH they share the connection)."""
    with ThreadPoolExecutor(max_workers=max(1, len(specs)), thread_name_prefix="launch") as pool:
        return list(pool.map(jobs.launch, specs))


def launch_data_phase(
    host: Host,
    host_config: HostConfig,
    target: TargetConfig,
    *,
    run_id: str,
    generation: GenerationSettings,
    drafter: str | None = None,
    drafter_dir: str | None = None,
) -> dict[str, JobState]:
    """Upload the workloads and start generation, and the drafter download beside it when one is named.
    Returns the job states by role ("generate", "download")."""
    workloads = upload_workloads(host, host_config.workdir)
    specs = {"generate": generation_spec(f"{run_id}-generate", host_config, target, workloads, generation)}
    if drafter:
        out = drafter_dir or f"{host_config.workdir.rstrip('/')}/drafters/{drafter.replace('/', '--')}"
        specs["download"] = download_spec(f"{run_id}-download", host_config, workloads, drafter, out)
    states = launch_all(Jobs(host, host_config.workdir), list(specs.values()))
    return dict(zip(specs, states, strict=True))


def job_progress(jobs: Jobs, job_id: str, lines: int = 100) -> dict[str, Any] | None:
    """The newest progress line in the job's log, or None when it printed none yet."""
    return last_progress(jobs.tail(job_id, lines))


def describe_progress(progress: dict[str, Any]) -> str:
    """One short line for a status table: '120/313 (38%), 2 failed, 85 tokens/s, ETA 12 min'."""
    done, total = progress.get("done", 0), progress.get("total") or 0
    bytes_unit = progress.get("unit") == "bytes"
    text = f"{format_size(done)} of {format_size(total)}" if bytes_unit else f"{done:,}/{total:,}"
    if total:
        text += f" ({done / total:.0%})"
    if progress.get("failed"):
        text += f", {progress['failed']:,} failed"
    if progress.get("tokens_per_s") is not None:
        text += f", {progress['tokens_per_s']:,.0f} tokens/s"
    if progress.get("eta_s") is not None:
        text += f", ETA {format_hours(progress['eta_s'] / 3600)}"
    return text
