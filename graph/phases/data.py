"""Synthetic data: the target answers the prompt set (hours of GPU time), while the drafter to finetune
from, if any, downloads beside it."""

from __future__ import annotations

import json

from eyas.graph.context import RunContext
from eyas.graph.state import RunState, run_sizes
from eyas.tools.jobs.data import PROMPT_SET, GenerationSettings, download_spec, generation_spec
from eyas.tools.jobs.detached import JobSpec

HELD_OUT = 16  # prompts kept out of generation, to measure the drafter on


def prompts_path(ctx: RunContext) -> str:
    return ctx.config.pipeline.prompts or ctx.artifact("prompts")


def build_jobs(ctx: RunContext, state: RunState) -> list[JobSpec]:
    sizes = run_sizes(state)
    settings = GenerationSettings(
        input=prompts_path(ctx),
        output=ctx.artifact("conversations"),
        concurrency=sizes.concurrency,
        max_tokens=sizes.max_tokens,
        limit=sizes.samples,
        temperature=0.0,
    )
    run_id = ctx.run.run_id
    specs = [generation_spec(f"{run_id}.generate", ctx.host_config, ctx.config.target, ctx.workloads_dir, settings)]
    base = ctx.config.pipeline.drafter_base
    if base:
        specs.append(
            download_spec(f"{run_id}.download", ctx.host_config, ctx.workloads_dir, base, drafter_base_dir(ctx))
        )
    return specs


def drafter_base_dir(ctx: RunContext) -> str:
    base = ctx.config.pipeline.drafter_base or ""
    return base if base.startswith("/") else ctx.artifact("drafter_base")


def setup(ctx: RunContext, state: RunState) -> None:
    """Put the prompt set (unless the config names one on the host) and the held-out prompts on the host."""
    rows = [json.loads(line) for line in PROMPT_SET.read_text().splitlines() if line.strip()]
    if ctx.config.pipeline.prompts is None:
        ctx.host.write_text(ctx.artifact("prompts"), PROMPT_SET.read_text())
    held_out = [row for row in rows if "prompt" in row][-HELD_OUT:]
    ctx.host.write_text(ctx.artifact("held_out"), "".join(json.dumps(row) + "\n" for row in held_out))
