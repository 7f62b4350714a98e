"""What a gate shows about production for the phases it asks about: keep, stop or reuse it, the expected
downtime, the exact commands that stop and start it, and the argv of every vLLM server the phases start."""

from __future__ import annotations

from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.downtime import stop_start_commands
from eyas.graph.phases.servers import (
    evaluation_servers,
    extraction_backend,
    extraction_server,
    launch_view,
    offline_samples,
    on_gpu,
    online_launch,
    online_server,
    online_training,
    production_launch,
)
from eyas.graph.state import RunState, run_plan
from eyas.tools.checks.server_flags import EVALUATE_OWN, EXTRACT_OWN

# The phases each gate asks about: the training gate approves vocab, training and the evaluation after it.
GATE_PHASES = {"data": ("data",), "extract": ("extract",), "train": ("train", "evaluate")}


def phase_servers(phase: str, ctx: RunContext, state: RunState) -> dict[str, Any] | None:
    """The servers `phase` starts, built from production's launch; None for a phase that starts none."""
    if phase == "evaluate":
        own = EVALUATE_OWN if on_gpu(state) else (*EVALUATE_OWN, "--dtype")
        launch = production_launch(ctx, own)
        return launch_view(launch, evaluation_servers(ctx, state, launch))
    if phase == "extract" and extraction_backend(state) == "vllm" and offline_samples(state) != 0:
        launch = production_launch(ctx, EXTRACT_OWN)
        return launch_view(launch, {"extraction": extraction_server(ctx, state, launch)})
    if phase == "train" and online_training(state):  # train.py --online's, beside the trainer
        launch = online_launch(ctx, state)
        return launch_view(launch, {"online extraction": online_server(ctx, state, launch)})
    return None


def production_view(phase: str, state: RunState, ctx: RunContext) -> dict[str, Any]:
    """Per phase the gate covers: the plan's production entry, the stop/start commands when it stops, the servers
    (each entry as GateView reads it into a ProductionEntry)."""
    plan = run_plan(state)
    view: dict[str, Any] = {}
    for covered in GATE_PHASES.get(phase, (phase,)):
        impact = plan.production(covered)
        entry = impact.model_dump() if impact is not None else {}
        if entry.get("action") == "stop":
            stop, start = stop_start_commands(ctx)
            entry["commands"] = [stop, f"(the {covered} phase's jobs)", start + "; then wait for the deep health check"]
        servers = phase_servers(covered, ctx, state)
        if servers is not None:
            entry["servers"] = servers
        if entry:
            view[covered] = entry
    return view


def production_estimate(view: dict[str, Any]) -> dict[str, Any]:
    """The policy's view: stop if any covered phase stops production, with the downtimes added up."""
    stops = [entry for entry in view.values() if entry.get("action") == "stop"]
    if not stops:
        actions = {entry.get("action") for entry in view.values()} - {None}
        return {"production_action": "reuse" if actions == {"reuse"} else ("keep" if actions else None)}
    hours = [entry.get("downtime_hours") for entry in stops]
    total = None if None in hours else sum(h for h in hours if h is not None)
    return {"production_action": "stop", "downtime_hours": total}
