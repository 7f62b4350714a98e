"""Measure what the drafter buys: the target served with and without it, at temperature 0, on held-out
prompts; acceptance from vLLM's own counters."""

from __future__ import annotations

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_job
from eyas.graph.phases.servers import on_gpu, production_launch, ready_timeout
from eyas.graph.state import RunState, run_sizes
from eyas.tools.checks.server_flags import EVALUATE_OWN
from eyas.tools.jobs.detached import JobSpec


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    sizes = run_sizes(state)
    request = EvaluateRequest(
        model_dir=ctx.model_dir,
        drafter_dir=ctx.artifact("drafter"),
        prompts=ctx.artifact("held_out"),
        out=ctx.artifact("evaluation"),
        k=[sizes.num_speculative_tokens],
        max_tokens=sizes.eval_max_tokens,
        launch=production_launch(ctx, EVALUATE_OWN if on_gpu(state) else (*EVALUATE_OWN, "--dtype")),
        start_timeout_s=ready_timeout(state),
    )
    return [evaluate_job(f"{ctx.run.run_id}.evaluate", ctx.host_config, ctx.workloads_dir, request)]
