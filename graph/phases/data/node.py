"""Synthetic data: the target answers the prompt set (hours of GPU time). The drafter to finetune from, if any, is
ready before the data gate (graph/phases/data/drafter.py)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.data.jobs import GenerationSettings, generation_sizes, generation_spec
from eyas.graph.phases.servers import production_checks
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_sizes
from eyas.tools.checks.service import production_api_key
from eyas.tools.errors import ConfigError
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.settings.sizes import PROMPT_SET


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    sizes = run_sizes(state)
    settings = GenerationSettings(
        input=ctx.artifact("prompts"),
        output=ctx.artifact("conversations"),
        **generation_sizes(sizes),
        temperature=0.0,
    )
    run_id = ctx.run.run_id
    endpoints = ctx.config.cluster.endpoints
    key = production_api_key(production_checks(ctx)).value
    target = ctx.config.target
    if len(endpoints) < 2:
        specs = [generation_spec(f"{run_id}.generate", ctx.host_config, target, ctx.workloads_dir, settings, key)]
    else:
        # One job per endpoint, each with a disjoint share of the prompts (by a hash of their ids) and its own
        # output: a shard that fails is retried alone and resumes from its own file; the extract phase joins them.
        n = len(endpoints)
        specs = [
            generation_spec(
                f"{run_id}.generate-{i}",
                ctx.host_config,
                target,
                ctx.workloads_dir,
                settings.model_copy(update={"base_url": url, "output": shard_output(ctx, i, n), "shard": (i, n)}),
                key,
            )
            for i, url in enumerate(endpoints)
        ]
    return specs


def shard_output(ctx: RunContext, index: int, shards: int) -> str:
    """Where generation shard `index` of `shards` writes its conversations on the host."""
    return ctx.artifact("conversations").removesuffix(".jsonl") + f".shard-{index}-of-{shards}.jsonl"


def join_shards(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The extract phase's setup: when generation ran in shards, their outputs (disjoint by construction, each
    sample once in its shard) become the run's one conversations file. Rewritten whole, so a rerun is harmless."""
    shards = [job for job in run_facts(state).jobs.get("data", []) if ".generate-" in job]
    if not shards:
        return {}
    parts = [shard_output(ctx, i, len(shards)) for i in range(len(shards))]
    target = ctx.artifact("conversations")
    command = f"cat {' '.join(map(shlex.quote, parts))} > {shlex.quote(target + '.tmp')} && mv "
    command += f"{shlex.quote(target + '.tmp')} {shlex.quote(target)}"
    ctx.host.run(command, timeout=3600).check("Joining the generation shards into one conversations file")
    return {}


def drafter_base_dir(ctx: RunContext) -> str:
    base = ctx.config.pipeline.drafter_base or ""
    return base if base.startswith("/") else ctx.artifact("drafter_base")


def prompt_source_argument(ctx: RunContext, state: RunState) -> str:
    """The run's prompt source as the host's workloads name it: `sharegpt`, or a JSONL file on the host (the shipped
    set is uploaded to the run's data directory)."""
    source = run_sizes(state).prompt_source
    return ctx.artifact("prompt_set") if source == "shipped" else source


def split_command(ctx: RunContext, state: RunState) -> str:
    """The host command that writes the run's training and held-out prompts (prompt_split.py)."""
    sizes = run_sizes(state)
    argv = [
        ctx.host_config.python, f"{ctx.workloads_dir}/prompt_split.py", "--source", prompt_source_argument(ctx, state),
        "--train", str(sizes.samples), "--held-out", str(sizes.held_out),
        "--train-out", ctx.artifact("prompts"), "--held-out-out", ctx.artifact("held_out"),
        "--max-prompt-chars", str(sizes.max_prompt_chars),
    ]  # fmt: skip
    return shlex.join(argv)


def setup(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """Split the run's prompt source into training and held-out prompts on the host (by a hash of each
    conversation id, so no held-out prompt is ever trained on); the summary goes into the run's state."""
    # The run's data is its owner's alone (0700 folders, 0600 files), as everything its jobs make (run.sh's umask).
    ctx.host.run(f"umask 077 && mkdir -p {shlex.quote(ctx.artifact('prompts').rsplit('/', 1)[0])}", timeout=30).check(
        "Creating the run's data directory"
    )
    if run_sizes(state).prompt_source == "shipped":
        ctx.host.write_text(ctx.artifact("prompt_set"), PROMPT_SET.read_text(), mode=0o600)
    result = ctx.host.run(f"umask 077 && {split_command(ctx, state)}", timeout=600)
    result.check("Splitting the prompt source into training and held-out prompts")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    if summary["train"] == 0 or summary["held_out"] == 0:
        chars = run_sizes(state).max_prompt_chars
        raise ConfigError(
            f"The prompt source {summary['source']} gave {summary['train']} training and {summary['held_out']} "
            f"held-out prompts ({summary['skipped']} rows skipped: a first question longer than {chars} characters, "
            "or without an id and a question); both need at least one. Choose another source (`--prompts`), or a "
            "file with more rows that have an id and a question."
        )
    return {"prompts": summary}
