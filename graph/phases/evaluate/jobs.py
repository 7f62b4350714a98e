"""The job that measures the trained drafter: evaluate.py serves the target with it and reads vLLM's counters.

Pure functions from plain values to JobSpecs (tools/jobs/request.py), and to the argv of the servers the job
starts, which the gates and `eyas run --dry-run` show."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from pydantic import Field

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import JobRequest, workload_job
from eyas.tools.launch.inherited import InheritedLaunch
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.fields import AbsolutePath
from eyas.tools.settings.sizes import Sizes
from eyas.tools.workloads.speculative import drafter_config, ngram_config
from eyas.tools.workloads.vllm_server import merge_flags, server_argv

# evaluate.py's knobs that no run size chooses (the same as its own defaults, which it keeps: it imports no eyas).
EVALUATE_PORT = 8800  # the loopback port its servers take in turn (side by side on CPU: 8800, 8801, ...)
EVALUATE_CONCURRENCY = 1  # prompts one at a time: the counters are read per prompt, for the confidence intervals
# What evaluate.py's vllm_server gives every server it starts, and the method of the drafter's servers.
SERVER_FLAGS = ("--seed", "0")


class EvaluateRequest(JobRequest):
    """evaluate.py starting its own servers on the host, one after the other on `port`."""

    model_dir: AbsolutePath
    drafter_dir: AbsolutePath
    prompts: AbsolutePath
    out: AbsolutePath = Field(description="the JSON result, e.g. in the run's folder")
    k: list[int] = Field(min_length=1, description="the run's num_speculative_tokens (evaluate_sizes)")
    max_tokens: int = Field(gt=0, description="the run's eval_max_tokens (evaluate_sizes)")
    concurrency: int = Field(EVALUATE_CONCURRENCY, gt=0)
    port: int = Field(EVALUATE_PORT, ge=1, le=65535)
    vllm_args: list[str] = Field(default_factory=list, description="extra flags for both servers")
    acceptance_only: bool = False
    ngram: bool = Field(False, description="also measure n-gram speculation at each k (the run's eval_ngram)")
    launch: InheritedLaunch | None = Field(None, description="production's launch, which both servers start from")
    start_timeout_s: float | None = Field(None, gt=0, description="per server; default: evaluate.py's")
    bench_concurrency: list[int] = Field(
        default_factory=list, description="`vllm bench serve`'s concurrencies (evaluate_sizes); empty: no bench"
    )
    bench_prompts: int = Field(0, ge=0, description="the run's bench_prompts (evaluate_sizes); 0: no bench")


class EvaluateSizes(TypedDict):
    """EvaluateRequest's fields that the run's sizes decide."""

    k: list[int]
    max_tokens: int
    bench_concurrency: list[int]
    bench_prompts: int
    ngram: bool


def measured_k(sizes: Sizes) -> list[int]:
    """Each k from eval_k_from to num_speculative_tokens, the run's own first: evaluate.py's top-level figures are its
    first k's, the ones the gates, the report and the model card show beside the other k."""
    k = sizes.num_speculative_tokens
    return [k, *range(min(sizes.eval_k_from, k), k)]


def evaluate_sizes(sizes: Sizes) -> EvaluateSizes:
    """The one mapping from a run's sizes to evaluate.py's flags, for the evaluate phase and the tests alike. `vllm
    bench serve` runs at concurrency 1 (one request's latency) and at the run's concurrency (a full batch: where a
    drafter's extra compute can cost more than it saves)."""
    return {
        "k": measured_k(sizes),
        "max_tokens": sizes.eval_max_tokens,
        "bench_concurrency": sorted({1, sizes.concurrency}),
        "bench_prompts": sizes.bench_prompts,
        "ngram": sizes.eval_ngram,
    }


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
    if request.ngram:
        flags.append("--ngram")
    if request.start_timeout_s is not None:
        flags += ["--start-timeout", str(request.start_timeout_s)]
    if request.bench_concurrency and request.bench_prompts:
        flags += ["--bench-concurrency", *map(str, request.bench_concurrency), "--bench-prompts",
                  str(request.bench_prompts)]  # fmt: skip
    launch_env = {}
    if request.launch is not None:
        flags.append(f"--inherit={request.launch.job_argument()}")
        launch_env = request.launch.env
    # The servers evaluate.py starts inherit this environment: production's, then eyas's own setting.
    env = {**launch_env, "VLLM_NO_USAGE_STATS": "1"}
    return workload_job(job_id, host, workloads_dir, "evaluate.py", flags, env=env)


def server_argvs(python: str, request: EvaluateRequest, cpu_flags: Sequence[str] = ()) -> dict[str, list[str]]:
    """The argv of each server that evaluate_job(request) starts, by name, in the order it starts them: the
    baseline (unless acceptance_only), then at each k the drafter and (request.ngram) n-gram speculation.
    evaluate.py runs in the target's venv and imports no eyas, so this is its eval_servers and measure over the
    job's own values; test_evaluation_servers.py runs that code on evaluate_job's argv and compares. `python` runs
    the job (the host's), `cpu_flags` are what evaluate.py adds on a host without CUDA
    (eval_servers.cpu_server_args), before --vllm-args so that those win. All on request.port: where evaluate.py
    starts them side by side (no CUDA, memory for all), the n-th takes port + n instead."""
    inherited: list[list[str | None]] = [list(pair) for pair in request.launch.flags] if request.launch else []

    def argv(*own: str) -> list[str]:
        flags = [*SERVER_FLAGS, *own, *cpu_flags, *request.vllm_args]
        return server_argv(python, Path(request.model_dir), request.port, *merge_flags(inherited, *flags))

    servers = {} if request.acceptance_only else {"baseline": argv()}
    for k in request.k:
        # evaluate.py names the drafter by its resolved path: the same, but for a symlink on the host.
        servers[f"speculative-k{k}"] = argv("--speculative-config", json.dumps(drafter_config(request.drafter_dir, k)))
        if request.ngram:
            servers[f"ngram-k{k}"] = argv("--speculative-config", json.dumps(ngram_config(k)))
    return servers
