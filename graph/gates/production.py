"""What a gate shows about production for the phases it asks about (and, at the first gate of a downtime window,
for every phase of the window: graph/window.py): keep, stop or reuse it, the expected downtime, the exact commands
that stop and start it, and the argv of every vLLM server the phases start."""

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
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_plan
from eyas.graph.window import GATE_PHASES, opened_at, span, window_of
from eyas.tools.checks.server_flags import EVALUATE_OWN, EXTRACT_OWN


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


def covered_phases(phase: str, state: RunState) -> list[str]:
    """The phases the gate asks about, and at a window's first gate every phase of the window after them."""
    covered = list(GATE_PHASES.get(phase, (phase,)))
    window = opened_at(run_plan(state), phase)
    return covered + [later for later in span(window) if later not in covered] if window is not None else covered


def stop_commands(ctx: RunContext, state: RunState, phase: str) -> list[str]:
    """Around a phase that stops production: the stop before it and the start after it, the stop only before a
    window's first phase and the start only after its last."""
    window = window_of(run_plan(state), phase)
    stop, start = stop_start_commands(ctx)
    before = [stop] if window is None or window.first == phase else []
    after = [start + "; then wait for the deep health check"] if window is None or window.last == phase else []
    return [*before, phase_jobs_step(phase), *after]


def generation_waits(phase: str, state: RunState) -> str | None:
    """Why the data phase cannot generate yet: its requests go to production's server, which verify found not
    answering (the plan then assumed its rates). None for any other phase, or with production up."""
    health = run_facts(state).verification.get("health")
    if phase != "data" or health is None or health.status != "fail":
        return None
    return (
        "generation cannot run until production is up: it sends every request to production's server, which did not "
        f"answer when the run verified the host ({health.message}); start production, then approve"
    )


def with_waits(phase: str, state: RunState, entry: dict[str, Any]) -> dict[str, Any]:
    """A phase's production entry with what it waits for (generation_waits) at the end of its reason."""
    waits = generation_waits(phase, state)
    if waits is None:
        return entry
    return {**entry, "reason": f"{entry['reason']}; {waits}" if entry.get("reason") else waits}


def phase_jobs_step(phase: str) -> str:
    """The place of the phase's own jobs among production's stop and start commands: a step, not a command."""
    return f"(the {phase} phase's jobs)"


def step_text(phase: str, step: str) -> str:
    """One of production's steps as printed: a command after "$ ", the phase's jobs in words (no command to run)."""
    return f"then the {phase} phase's jobs run" if step == phase_jobs_step(phase) else f"$ {step}"


def production_view(phase: str, state: RunState, ctx: RunContext) -> dict[str, Any]:
    """Per phase the gate covers: the plan's production entry, the stop/start commands when it stops, the servers
    (each entry as GateView reads it into a ProductionEntry)."""
    plan = run_plan(state)
    view: dict[str, Any] = {}
    for covered in covered_phases(phase, state):
        impact = plan.production(covered)
        entry = impact.model_dump() if impact is not None else {}
        if entry.get("action") == "stop":
            entry["commands"] = stop_commands(ctx, state, covered)
        servers = phase_servers(covered, ctx, state)
        if servers is not None:
            entry["servers"] = servers
        entry = with_waits(covered, state, entry)
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
