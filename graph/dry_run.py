"""`eyas run --dry-run`: walk the whole plan without launching anything, for an operator to read before an
overnight run. It verifies and plans as a run would (reading the host, starting nothing), then builds each
phase's jobs with the phases' own code and prints, in the pipeline's order, every host command it would run (the
drafter's preparation before the data gate; a phase's setup, such as the prompt split, then its jobs), the GPUs each
needs, what happens to production (as the pipeline decides it: graph/downtime.py, with each downtime window stopped
once and started once: graph/window.py), and the vLLM argv of every server eyas would start, ending with the deploy
step behind its gate (production's argv with the drafter, the restart and the rollback). Nothing is written to the
host, and no run folder is made; paths on the host are those of a run named `dry-run`."""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.downtime import production_action
from eyas.graph.gates.deploy import change_of, deploy_view
from eyas.graph.gates.production import phase_servers, step_text, stop_commands, with_waits
from eyas.graph.phases.data import node as data
from eyas.graph.phases.data.drafter import drafter_spec
from eyas.graph.phases.plan import node as plan
from eyas.graph.phases.verify import node as verify
from eyas.graph.pipeline import PHASES
from eyas.graph.runs import RunDir
from eyas.graph.state import RunPlan, RunState, run_plan
from eyas.graph.window import span, window_of
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.downtime_window import DowntimeWindow
from eyas.tools.planning.gpu_budget import gpu_phrase
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode
from eyas.tools.planning.model_config import MeasureError, read_model_dims
from eyas.tools.planning.paths import with_backend
from eyas.tools.planning.prompt_supply import supply_verdict
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import Sizes

RUN_ID = "dry-run"
# The host commands a phase's setup runs before its jobs (graph/pipeline.py's SETUP), by the builder the setup runs:
# the data phase splits the prompt source into training and held-out prompts (prompt_split.py).
SETUP_COMMANDS = {"data": data.split_command}


def dry_run(config: EyasConfig, sizes: Sizes) -> dict[str, Any]:
    """The whole plan as JSON-ready data; reads the host, launches nothing. A server still loading is not waited
    for (the dry run says so instead)."""
    config = config.model_copy(update={"target": config.target.model_copy(update={"load_wait_s": 0.0})})
    host = open_host(config.target.host, config.host())
    try:
        with tempfile.TemporaryDirectory(prefix="eyas-dry-run-") as scratch:
            ctx = RunContext(
                config=config, host=host, http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(Path(scratch) / RUN_ID)
            )
            return _walk(ctx, sizes)
    finally:
        host.close()


def _walk(ctx: RunContext, sizes: Sizes) -> dict[str, Any]:
    runtime = Runtime(context=ctx)
    state: RunState = {"run_id": RUN_ID, "sizes": sizes.model_dump()}
    state.update(verify.verify_node(state, runtime))  # type: ignore[typeddict-item]
    state["plan"] = _plan(ctx, state, runtime)
    return walk_phases(ctx, state)


def walk_phases(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The walk of a verified and planned state: every phase's jobs, production and servers, then the deploy."""
    phases = [_phase(ctx, state, phase.name, phase.build) for phase in PHASES]  # the pipeline's own, in its order
    phases.append(_deploy(ctx, state))
    planned = run_plan(state)
    windows = [window.model_dump(mode="json") for window in planned.downtime_windows()]
    walk = {
        "run_id": RUN_ID,
        "host": ctx.host.name,
        "sizes": state["sizes"],
        "verification": state.get("verification", {}),
        "gpus": state.get("gpus", {}),
        "plan": {**planned.model_dump(mode="json", exclude={"phases"}), "downtime_windows": windows},
        "phases": phases,
    }
    walk["stops"] = stops(walk)
    drafter = drafter_spec(ctx)
    if drafter is not None:  # before the data gate, which shows its outcome (graph/phases/data/drafter.py)
        walk["drafter"] = {
            "job_id": drafter.job_id,
            "command": shlex.join(drafter.argv),
            "when": "before the data gate",
        }
    return walk


def stops(walk: dict[str, Any]) -> list[str]:
    """Why a run of this plan would stop before its end (none: it would not): the plan does not fit, the prompt
    source holds too few prompts, or a phase's path cannot work here. `eyas run --dry-run` then says no (exit 1)."""
    plan = walk["plan"]
    reasons = ["the plan does not fit (see plan:)"] if plan.get("fits") is False else []
    if (plan.get("prompt_supply") or {}).get("enough") is False:
        reasons.append("the prompt source holds too few prompts (see plan:)")
    reasons += [f"the {phase['phase']} phase is blocked" for phase in walk["phases"] if phase.get("blocked")]
    return reasons


def _plan(ctx: RunContext, state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:  # RunPlan's JSON
    """The run's plan; when the server cannot be measured (down, loading), the GPU budget alone, from the
    model's config.json in target.model_dir, with the hours unknown, and the prompt supply (it needs no server)."""
    try:
        return dict(plan.plan_node(state, runtime)["plan"])
    except MeasureError as exc:
        model_dir = ctx.config.target.model_dir
        if model_dir is None:
            raise EyasError(
                f"The dry run could not measure the plan ({exc}) and target.model_dir is not set, so the model's "
                "size is unknown: start the server, or set target.model_dir to the model's directory on the host."
            ) from None
        dims = read_model_dims(ctx.host, f"{model_dir.rstrip('/')}/config.json")
        production = plan.production_plan(ctx, state, dims, {}, None)
        phases = {phase: {"production": impact} for phase, impact in production["phases"].items()}
        supply = plan.planned_supply(ctx, state)
        blind = {
            **plan.checked_paths(state, production),
            "verdict": f"hours not measured ({exc}); the GPU budget is from {model_dir}/config.json. "
            + supply_verdict(supply),
            "phases": phases,
            "production_load": production["load"],
            "captured_layers": dims.default_layers(),
            "prompt_supply": supply,
        }
        return RunPlan.model_validate(blind).model_dump(mode="json")


def _production(state: RunState, name: str) -> dict[str, Any]:
    """What happens to production while the phase runs, as the pipeline decides it (graph/downtime.py): the plan's
    entry for the phase, production left stopped for a phase the plan gives none inside a downtime window (vocab,
    on the CPU, between extraction and training), else kept up for it."""
    impact = run_plan(state).production(name)
    if impact is not None:
        return with_waits(name, state, impact.model_dump())
    window = window_of(run_plan(state), name)
    if window is not None:
        phases = ", ".join(span(window))
        reason = f"the plan gives {name} no GPU; it runs inside the downtime window ({phases}), production stopped"
        return {"action": "stopped", "gpus": [], "reason": reason}
    action = production_action(state, name)
    return {"action": action, "gpus": [], "reason": f"the plan gives {name} no GPU, so production stays up meanwhile"}


def _phase(ctx: RunContext, state: RunState, name: str, build: Any) -> dict[str, Any]:
    planned = run_plan(state)
    production = _production(state, name)
    entry: dict[str, Any] = {"phase": name, "phase_hours": planned.phase(name).phase_hours}
    if production.get("action") == "stop":
        production["commands"] = stop_commands(ctx, state, name)
    entry["production"] = production
    entry["gpus"] = production.get("gpus", [])
    path = with_backend(planned.paths, planned.extraction).get(name)
    blocked = path.blocked if path is not None else None
    if blocked:
        entry["blocked"] = f"{blocked.rstrip('.')}; a run would stop at its gate and never launch it"
    try:
        setup = SETUP_COMMANDS.get(name)
        if setup is not None:
            entry["setup"] = [setup(ctx, state)]
        specs = build(ctx, state)
    except (EyasError, ValueError) as exc:
        entry["error"] = f"the {name} phase's jobs cannot be built: {exc}"
        return entry
    # Secret-looking variables travel by file (JobSpec's secrets): only their names are shown.
    entry["jobs"] = [
        {"job_id": spec.job_id, "command": shlex.join(spec.argv), "env": spec.env, "secrets": sorted(spec.secrets)}
        for spec in specs
    ]
    servers = phase_servers(name, ctx, state)
    if servers is not None:
        entry["servers"] = servers
    return entry


def _deploy(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The deploy step as its gate would show it: production's argv with the drafter, the steps, the rollback."""
    view = deploy_view(ctx, state)
    change = change_of(view)
    production = view.production.get("deploy")
    entry: dict[str, Any] = {"phase": "deploy", "phase_hours": None, "gate": "gate_deploy",
                             "gpus": production.gpus if production else [], "steps": view.commands}  # fmt: skip
    entry["production"] = production.model_dump(mode="json", exclude={"gpus", "servers"}) if production else {}
    if production is not None and production.servers is not None:
        entry["servers"] = {"servers": {"production with the drafter": production.servers.servers["after"]}}
    if change.error is not None:
        entry["error"] = change.error
        entry["production"] = {"action": "keep", "reason": "the deploy cannot be made, so production is not touched"}
    return entry


def dry_run_lines(walk: dict[str, Any]) -> list[str]:
    """The dry run for a terminal: verify's checks, the plan, then per phase its setup and jobs' commands, GPUs,
    production and the servers' argv."""
    lines = [f"dry run on {walk['host']} (nothing launched; host paths are those of a run named {RUN_ID})"]
    lines += verification_lines(walk.get("verification") or {})
    lines.append(f"plan: {walk['plan'].get('verdict', '')}")
    if walk["plan"].get("extraction"):
        lines.append(f"extraction backend {walk['plan']['extraction']['reason']}")
    if walk["plan"].get("extraction_mode"):
        mode = HiddenStatesMode.model_validate(walk["plan"]["extraction_mode"])
        lines += [f"{label}: {text}" for label, text in mode.lines()]
    load = walk["plan"].get("production_load") or {}
    if load:
        lines.append(f"production loads in {load['load_s'] / 60:.0f} min ({load['source']})")
    for window in walk["plan"].get("downtime_windows", []):
        lines.append(f"downtime window: {DowntimeWindow.model_validate(window).line()}")
    drafter = walk.get("drafter")
    if drafter:
        lines.append(f"drafter (downloaded, checked against the target and converted {drafter['when']}):")
        lines.append(f"   job {drafter['job_id']}: $ {drafter['command']}")
    for phase in walk["phases"]:
        production = phase.get("production") or {}
        hours = production.get("downtime_hours")
        down = f", down {hours:.2f} h" if production.get("action") in ("stop", "restart") and hours is not None else ""
        action = production.get("action") or "not planned"
        lines.append(f"== {phase['phase']}: production {action}{down}; {gpu_phrase(phase['gpus'])}")
        if production.get("reason"):
            lines.append(f"   {production['reason']}")
        lines += [f"   production: {step_text(phase['phase'], step)}" for step in production.get("commands", [])]
        for key in ("blocked", "error"):
            if phase.get(key):
                lines.append(f"   {phase[key]}")
        lines += [f"   setup: $ {command}" for command in phase.get("setup", [])]
        lines += [f"   job {job['job_id']}: $ {job['command']}" for job in phase.get("jobs", [])]
        lines += [f"   step: $ {step}" for step in phase.get("steps", [])]
        servers = phase.get("servers") or {}
        for key in ("inherited", "overridden", "dropped"):
            if servers.get(key):
                lines.append(f"   servers {key}: {', '.join(servers[key])}")
        lines += [f"   server {name}: $ {shlex.join(argv)}" for name, argv in servers.get("servers", {}).items()]
    if walk["stops"]:
        lines.append(f"a run of this plan would stop before its end: {'; '.join(walk['stops'])}")
    return lines


def verification_lines(verification: dict[str, Any]) -> list[str]:
    """Verify's checks as a table (check, status, finding), the columns aligned; none when nothing was verified."""
    if not verification:
        return []
    rows = [("check", "status", "finding")]
    rows += [
        (name, str(check.get("status", "?")), str(check.get("message", ""))) for name, check in verification.items()
    ]
    name_width, status_width = (max(len(row[column]) for row in rows) for column in (0, 1))
    table = [f"   {name:<{name_width}}  {status:<{status_width}}  {finding}" for name, status, finding in rows]
    return ["verification:", *table]
