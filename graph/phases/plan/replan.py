"""The plan made again once the data exists: the generated file's own averages (its answers' real lengths and the
questions each sample really asked) replace the sample of answers the first plan had, at the rates that plan
measured, so the later gates weigh the hours and bytes expected now, beside those planned at the start (kept as
state["plan_at_start"]). A plan that learns what the data phase taught it, before any GPU hour is spent on
extraction and training."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.phases.plan.node import made_plan
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState
from eyas.tools.planning.measure import Measured, generated_stats


def replan_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    run = run_facts(state)
    path = run.artifact("conversations")
    first, supply = run.measured, run.plan.prompt_supply
    if not first or not path or supply is None:  # planned before this node existed, or nothing generated
        return {}
    stats = generated_stats(ctx.host, path)
    if stats is None:
        return {}
    measured = Measured.model_validate(first)
    measured = measured.model_copy(update={
        "inputs": measured.inputs.model_copy(update={"measured": stats}),
        "sources": {**measured.sources, "tokens": f"averages of {stats.samples} samples of {path} (generated)"},
    })  # fmt: skip
    again = made_plan(ctx, state, measured, supply)
    ctx.on_note(f"plan again, from the generated data: {again.verdict}")
    start = run.plan_at_start or run.plan  # the first plan stays the start, whatever later plans say
    return {"plan": again.model_dump(mode="json"), "plan_at_start": start.model_dump(mode="json")}
