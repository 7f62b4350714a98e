"""The data phase's jobs on the host: synthetic generation, and the drafter's download (run before the data gate).

Both run with the ML environment's absolute interpreter path (HostConfig.python): a bare `python` in a
detached job finds whatever a non-interactive PATH holds, which is rarely the venv with vLLM. Launching is
idempotent by job id (eyas.tools.jobs.detached), so a resumed controller re-attaches instead of starting twice; a
generation job that was killed is launched again under a new id (or after `forget`) and resumes from its
output file.
"""

from __future__ import annotations

import posixpath
from typing import TypedDict

from pydantic import BaseModel, Field

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import optional_flags, workload_job
from eyas.tools.launch.api_key import JOB_KEY_ENV
from eyas.tools.settings.config import HostConfig, TargetConfig
from eyas.tools.settings.sizes import Sizes

PROGRESS_EVERY_S = 10.0  # seconds between generate.py's progress lines, which the run's polls read


class GenerationSettings(BaseModel):
    """generate.py's options that a run chooses; the rest keep the script's defaults. The sizes have no default
    here: they are the run's (generation_sizes), never a second copy of Sizes' defaults."""

    input: str = Field(description="prompts JSONL on the host")
    output: str = Field(description="generated JSONL on the host (appended to, resumed from)")
    base_url: str | None = Field(None, description="the server as the HOST reaches it; default target.base_url")
    concurrency: int = Field(ge=1)
    max_tokens: int = Field(ge=1, description="longest answer per turn")
    max_seq_len: int = Field(ge=1, description="longest conversation: a later question that would pass it is not asked")
    temperature: float | None = None
    limit: int | None = Field(None, ge=1, description="the first N prompts; None: all of them")
    progress_every: float = Field(PROGRESS_EVERY_S, gt=0)
    shard: tuple[int, int] = Field((0, 1), description="(I, N): the samples whose id hashes to shard I of N")


class GenerationSizes(TypedDict):
    """GenerationSettings' fields that the run's sizes decide."""

    concurrency: int
    max_tokens: int
    max_seq_len: int
    limit: int


def generation_sizes(sizes: Sizes) -> GenerationSizes:
    """The one mapping from a run's sizes to generate.py's flags, for the data phase and the tests alike."""
    return {
        "concurrency": sizes.concurrency,
        "max_tokens": sizes.max_tokens,
        "max_seq_len": sizes.max_seq_len,
        "limit": sizes.samples,
    }


def generation_spec(
    job_id: str,
    host_config: HostConfig,
    target: TargetConfig,
    workloads: str,
    settings: GenerationSettings,
    key: str | None,
) -> JobSpec:
    """generate.py against production (or the cluster's endpoints), with production's API key `key` (None: it wants
    none), which the job reads from its environment, filled from a file in its directory only the owner reads."""
    flags = [
        "--input", settings.input, "--output", settings.output,
        "--base-url", settings.base_url or target.base_url, "--model", target.model,
        "--concurrency", str(settings.concurrency), "--max-tokens", str(settings.max_tokens),
        "--max-seq-len", str(settings.max_seq_len),
        "--progress-every", str(settings.progress_every),
    ]  # fmt: skip
    if settings.shard != (0, 1):
        flags += ["--shard", f"{settings.shard[0]}/{settings.shard[1]}"]
    flags += optional_flags({"--temperature": settings.temperature, "--limit": settings.limit})
    secrets: dict[str, str] = {}
    if key:
        name = target.api_key_env or JOB_KEY_ENV
        flags += ["--api-key-env", name]
        secrets[name] = key
    return workload_job(job_id, host_config, workloads, "generate.py", flags, secrets=secrets, cwd=host_config.workdir)


def download_spec(
    job_id: str,
    host_config: HostConfig,
    workloads: str,
    source: str,
    out: str,
    target: str | None = None,
    ready: str | None = None,
) -> JobSpec:
    """`source` is a hub repo id (downloaded into `out`) or a directory on the host (validated, left as is). With
    the target's directory, the job also makes the drafter training takes in `ready` (default OUT/speculators):
    speculators' format, a SpecForge one converted, loaded as training would load it, so a drafter that cannot be
    finetuned stops the run at the data gate, before generation (graph/phases/data/drafter.py)."""
    flags = ["--source", source, "--out", out]
    if target:
        flags += ["--target", target, "--ready", ready or training_drafter(out)]
    return workload_job(job_id, host_config, workloads, "download.py", flags, cwd=host_config.workdir)


def training_drafter(run_drafter_dir: str) -> str:
    """The drafter train.py finetunes from: the speculators-format one the download job made (download.py --ready)
    in the run's drafter folder, from a hub id or a directory on the host alike."""
    return posixpath.join(run_drafter_dir, "speculators")
