"""Plan with numbers before anything long starts: hours from measured throughput, bytes from the model's
shape, and a verdict against the verified free disk, with the ways out when it does not fit."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.state import RunState, run_sizes
from eyas.tools.planning.estimate import estimate, verdict
from eyas.tools.planning.measure import Figures, measure_inputs


def plan_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    sizes = run_sizes(state)
    conversations = state.get("artifacts", {}).get("conversations")
    figures = Figures(
        samples=sizes.samples,
        max_tokens=sizes.max_tokens,
        free_disk_bytes=state.get("free_disk_bytes"),
        generated_file=conversations,
    )
    measured = measure_inputs(figures, config=ctx.config, host=ctx.host, http=ctx.http, clock=ctx.clock)
    plan = estimate(measured.inputs)
    text = verdict(measured.inputs, plan)
    ctx.on_note(f"plan: {text}")
    return {
        "phase": "plan",
        "plan": {
            "fits": plan.fits,
            "verdict": text,
            "needed_bytes": plan.needed_bytes,
            "free_disk_bytes": plan.free_disk_bytes,
            "total_hours": plan.total_hours,
            "sources": measured.sources,
            "alternatives": [alternative.model_dump(exclude_none=True) for alternative in plan.alternatives],
            # What each gate weighs against the policy's budgets.
            "phases": {
                "data": {"phase_hours": plan.generation_hours, "disk_bytes": plan.data_bytes},
                "extract": {"phase_hours": plan.extraction_hours, "disk_bytes": plan.hidden_state_bytes},
                "train": {"phase_hours": plan.training_hours, "disk_bytes": plan.checkpoint_bytes},
            },
        },
    }
