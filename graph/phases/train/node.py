"""The drafter itself: a draft vocabulary from the tokens the target really produces, then EAGLE-3 training
on the target's hidden states (from scratch, or finetuning the downloaded drafter)."""

from __future__ import annotations

from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.data.jobs import training_drafter
from eyas.graph.phases.data.node import prompt_source_argument
from eyas.graph.phases.extract.node import trusts_remote_code
from eyas.graph.phases.servers import hidden_states_mode, online_launch, online_training, ready_timeout
from eyas.graph.phases.train.jobs import TrainRequest, VocabRequest, train_job, train_sizes, vocab_job
from eyas.graph.state import RunState, run_sizes
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import fan_out


def build_vocab_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    request = VocabRequest(
        model_dir=ctx.model_dir,
        hidden_states_dir=ctx.artifact("hidden_states"),
        out_dir=ctx.artifact("vocab"),
        draft_vocab_size=run_sizes(state).draft_vocab_size,
        fill_from=prompt_source_argument(ctx, state),
        trust_remote_code=trusts_remote_code(ctx, state),
    )
    return [vocab_job(f"{ctx.run.run_id}.vocab", ctx.host_config, ctx.workloads_dir, request)]


def build_train_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    sizes = run_sizes(state)
    vocab, n = ctx.artifact("vocab"), sizes.draft_vocab_size
    finetune = ctx.config.pipeline.drafter_base is not None
    request = TrainRequest(
        hidden_states_dir=ctx.artifact("hidden_states"),
        model_dir=ctx.model_dir,
        out_dir=ctx.artifact("drafter"),
        work_dir=ctx.artifact("checkpoints"),
        # A finetuned drafter keeps its own vocabulary mapping.
        d2t=None if finetune else f"{vocab}/d2t-{n}.npy",
        t2d=None if finetune else f"{vocab}/t2d-{n}.npy",
        from_pretrained=finetune_from(ctx) if finetune else None,
        **train_sizes(sizes),
        trust_remote_code=trusts_remote_code(ctx, state),
        **online_fetch(ctx, state),
        tracking=ctx.config.tracking,
        run_name=ctx.run.run_id,
    )
    # Online, train.py starts its extraction server beside it on one node (the plan's hours count one).
    nodes = 1 if request.online else ctx.config.cluster.train_nodes
    # One job per node, the same flags but the rank; they meet in the checkpoints directory (train.py --rendezvous).
    return fan_out(
        f"{ctx.run.run_id}.train",
        nodes,
        lambda job_id, rank: train_job(
            job_id, ctx.host_config, ctx.workloads_dir, request.model_copy(update={"nodes": nodes, "node_rank": rank})
        ),
    )


def online_fetch(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The plan's online or hybrid mode: train.py fetches the token-only samples' hidden states from an extraction
    server it starts from production's launch (its layout, flags and environment), a window at a time."""
    mode = hidden_states_mode(state)
    if mode is None or not online_training(state):
        return {}
    return {
        "online": True,
        "launch": online_launch(ctx, state),
        "window": mode.window,
        "ready_timeout_s": ready_timeout(state),
    }


def finetune_from(ctx: RunContext) -> str:
    """The drafter to finetune: the speculators-format one the download job made before the data gate (converted
    from SpecForge's format if need be), from a hub id or a directory on the host, taken as is."""
    return training_drafter(ctx.artifact("drafter_base"))
