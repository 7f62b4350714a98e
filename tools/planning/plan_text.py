"""The plan in words, as the operator reads it at the gates and in `eyas plan`: the samples, the verdict with its
ways out, the worst case beside a plan made on a sample of answers, and the phases that run as several jobs."""

from __future__ import annotations

from eyas.tools.planning.cluster_plan import ShardPlan
from eyas.tools.planning.estimate import Plan, PlanInputs
from eyas.tools.settings.units import format_hours, format_size


def samples_text(inputs: PlanInputs, plan: Plan) -> str:
    """The samples and their hidden states, as the verdicts begin."""
    how = {"measured": "measured average", "sampled": "expected", "max_tokens": "at most"}[plan.tokens_from]
    tokens = f"{plan.tokens_per_sample:,.0f} tokens ({how}"
    if plan.disk_tokens_per_sample is not None:
        tokens += f"; the disk planned at {plan.disk_tokens_per_sample:,.0f}"
    tokens += ")"
    shape = (
        f"{len(plan.captured_layers)} layers x {inputs.model.hidden_size:,} values x {inputs.bytes_per_value} B"
        " per token"
    )
    return f"{plan.samples:,} samples of {tokens}: hidden states {format_size(plan.hidden_state_bytes)} ({shape})"


def verdict(inputs: PlanInputs, plan: Plan) -> str:
    """The plan in one paragraph, as the operator reads it at the approval gate."""
    head = (
        f"{samples_text(inputs, plan)}, "
        f"{format_size(plan.needed_bytes)} with the data and checkpoints, against {format_size(plan.free_disk_bytes)}"
        f" free at {plan.data_path}."
    )
    hours = (
        f" Time: generation {format_hours(plan.generation_hours)}, extraction {format_hours(plan.extraction_hours)}, "
        f"training {format_hours(plan.training_hours)}."
    )
    if plan.shards:
        hours += f" {per_job(plan.shards)}"
    hours += worst_text(plan)
    if plan.fits:
        return f"Fits: {head} {format_size(plan.disk_left_bytes)} stays free.{hours}"
    short = plan.needed_bytes + plan.reserve_bytes - plan.free_disk_bytes
    ways = "; ".join(alternative.summary for alternative in plan.alternatives)
    reserve = format_size(plan.reserve_bytes)
    return f"Does not fit: {head} It is {format_size(short)} short (keeping {reserve} free).{hours} Ways out: {ways}."


def worst_text(plan: Plan) -> str:
    """The worst case beside a plan made on a sample of answers, one sentence ("" when the plan is the bound)."""
    worst = plan.worst_case
    if worst is None:
        return ""
    verdict = "fits" if worst.fits else "does not fit"
    return (
        f" Worst case, every answer at max_tokens: generation {format_hours(worst.generation_hours)}, extraction "
        f"{format_hours(worst.extraction_hours)}, training {format_hours(worst.training_hours)}, "
        f"{format_size(worst.needed_bytes)} ({verdict})."
    )


def per_job(shards: list[ShardPlan]) -> str:
    """The phases that run as several jobs, one sentence: N jobs x hours (and bytes) each."""
    nouns = {"generation": "endpoints", "extraction": "shards", "training": "nodes"}
    parts = [
        f"{shard.phase} {shard.jobs} {nouns[shard.phase]} x {format_hours(shard.hours_each)}"
        + (f" and {format_size(shard.bytes_each)}" if shard.bytes_each else "")
        for shard in shards
    ]
    return (
        f"Per job, at once: {'; '.join(parts)} (each job at one job's measured speed, an upper bound for "
        "generation and training)."
    )
