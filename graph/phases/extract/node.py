"""Hidden-state extraction: the target's own activations over its own answers, one file per sample."""

from __future__ import annotations

import json
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.data.node import drafter_base_dir
from eyas.graph.phases.extract.jobs import ExtractionRequest, extract_job, extraction_sizes
from eyas.graph.phases.servers import extraction_backend, offline_samples, production_launch, ready_timeout
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_sizes
from eyas.tools.checks.server_flags import EXTRACT_OWN
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import fan_out
from eyas.tools.workloads.drafter_format import shape


def trusts_remote_code(ctx: RunContext, state: RunState) -> bool:
    """As verify resolved it from the unit and the config; the config alone for a run checkpointed before that."""
    verified = run_facts(state).trust_remote_code
    return verified if verified is not None else bool(ctx.config.target.trust_remote_code)


def drafter_layers(ctx: RunContext) -> list[int] | None:
    """The target layers a drafter to finetune reads (downloaded by now): extraction captures exactly those."""
    if not ctx.config.pipeline.drafter_base:
        return None
    return shape(json.loads(ctx.host.read_text(f"{drafter_base_dir(ctx)}/config.json"))).aux_layer_ids


def vllm_backend(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The plan's backend (plan["extraction"]): vllm serves the target with production's launch (its parallel
    layout, flags and environment); hf, the transformers backend, needs no server; and an online run (K = 0)
    extracts nothing, so it starts no server whatever the backend."""
    if extraction_backend(state) != "vllm" or offline_samples(state) == 0:
        return {}
    return {
        "backend": "vllm",
        "launch": production_launch(ctx, EXTRACT_OWN),
        "ready_timeout_s": ready_timeout(state),
    }


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    request = ExtractionRequest(
        model_dir=ctx.model_dir,
        conversations=run_facts(state).artifact("conversations") or ctx.artifact("conversations"),
        out_dir=ctx.artifact("hidden_states"),
        **extraction_sizes(run_sizes(state)),
        trust_remote_code=trusts_remote_code(ctx, state),
        layers=drafter_layers(ctx),
        **vllm_backend(ctx, state),
        # The plan's mode: hybrid keeps the first K samples' hidden states, online none (token files only).
        offline_samples=offline_samples(state),
    )
    shards = ctx.config.cluster.extract_shards
    # N jobs fill one directory with disjoint files (sample index modulo N); a failed shard is retried alone.
    return fan_out(
        f"{ctx.run.run_id}.extract",
        shards,
        lambda job_id, i: extract_job(
            job_id, ctx.host_config, ctx.workloads_dir, request.model_copy(update={"shard": (i, shards)})
        ),
    )
