"""Hidden-state extraction: the target's own activations over its own answers, one file per sample."""

from __future__ import annotations

from eyas.graph.context import RunContext
from eyas.graph.state import RunState, run_sizes
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.drafter import ExtractionRequest, extract_job


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    request = ExtractionRequest(
        model_dir=ctx.model_dir,
        conversations=state.get("artifacts", {}).get("conversations") or ctx.artifact("conversations"),
        out_dir=ctx.artifact("hidden_states"),
        max_tokens=run_sizes(state).max_seq_len,
    )
    return [extract_job(f"{ctx.run.run_id}.extract", ctx.host_config, ctx.workloads_dir, request)]
