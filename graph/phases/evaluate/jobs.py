"""The job that measures the trained drafter: evaluate.py serves the target with it and reads vLLM's counters.

Pure functions from plain values to JobSpecs (tools/jobs/request.py)."""

from __future__ import annotations

import shlex

from pydantic import Field

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import JobRequest, workload_job
from eyas.tools.launch.inherited import InheritedLaunch
from eyas.tools.settings.config import AbsolutePath, HostConfig


class EvaluateRequest(JobRequest):
    """evaluate.py starting its own servers on the host, one after the other on `port`."""

    model_dir: AbsolutePath
    drafter_dir: AbsolutePath
    prompts: AbsolutePath
    out: AbsolutePath = Field(description="the JSON result, e.g. in the run's folder")
    k: list[int] = Field(default_factory=lambda: [3], min_length=1)
    max_tokens: int = Field(128, gt=0)
    concurrency: int = Field(1, gt=0)
    port: int = Field(8800, ge=1, le=65535)
    vllm_args: list[str] = Field(default_factory=list, description="extra flags for both servers")
    acceptance_only: bool = False
    launch: InheritedLaunch | None = Field(None, description="production's launch, which both servers start from")
    start_timeout_s: float | None = Field(None, gt=0, description="per server; default: evaluate.py's")


def evaluate_job(job_id: str, host: HostConfig, workloads_dir: str, request: EvaluateRequest) -> JobSpec:
    flags = [
        "--model", request.model_dir,
        "--drafter", request.drafter_dir,
        "--prompts", request.prompts,
        "--out", request.out,
        "--k", *map(str, request.k),
        "--max-tokens", str(request.max_tokens),
        "--concurrency", str(request.concurrency),
        "--port", str(request.port),
    ]  # fmt: skip
    if request.vllm_args:
        flags.append(f"--vllm-args={shlex.join(request.vllm_args)}")  # one value, though it starts with --
    if request.acceptance_only:
        flags.append("--acceptance-only")
    if request.start_timeout_s is not None:
        flags += ["--start-timeout", str(request.start_timeout_s)]
    launch_env = {}
    if request.launch is not None:
        flags.append(f"--inherit={request.launch.job_argument()}")
        launch_env = request.launch.env
    # The servers evaluate.py starts inherit this environment: production's, then eyas's own setting.
    env = {**launch_env, "VLLM_NO_USAGE_STATS": "1"}
    return workload_job(job_id, host, workloads_dir, "evaluate.py", flags, env=env)
