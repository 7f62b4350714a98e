"""Measure what the drafter buys: the target served with and without it, at temperature 0, on held-out
prompts; acceptance from vLLM's own counters."""

from __future__ import annotations

from eyas.graph.context import RunContext
from eyas.graph.state import RunState
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.train import EvaluateRequest, evaluate_job


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    sizes = state.get("sizes", {})
    request = EvaluateRequest(
        model_dir=ctx.model_dir,
        drafter_dir=ctx.artifact("drafter"),
        prompts=ctx.artifact("held_out"),
        out=ctx.artifact("evaluation"),
        k=[sizes.get("num_speculative_tokens", 3)],
        max_tokens=sizes.get("eval_max_tokens", 128),
    )
    return [evaluate_job(f"{ctx.run.run_id}.evaluate", ctx.host_config, ctx.workloads_dir, request)]
