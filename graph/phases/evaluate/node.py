"""Measure what the drafter buys: the target served with and without it, at temperature 0, on held-out
prompts; acceptance from vLLM's own counters."""

from __future__ import annotations

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate.jobs import evaluate_job
from eyas.graph.phases.servers import evaluation_launch, evaluation_request
from eyas.graph.state import RunState
from eyas.tools.jobs.detached import JobSpec


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    """The evaluate job, from the request whose servers the training gate showed (servers.evaluation_request)."""
    request = evaluation_request(ctx, state, evaluation_launch(ctx, state))
    return [evaluate_job(f"{ctx.run.run_id}.evaluate", ctx.host_config, ctx.workloads_dir, request)]
