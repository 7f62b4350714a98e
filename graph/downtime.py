"""Production downtime in a run. Everything eyas stops, it restarts.

When the plan says a GPU phase cannot share the host (`plan["phases"][phase]["production"]["action"] ==
"stop"`), the phase's launch stops the production service after its gate was approved, and the phase's monitor
starts it again when the phase fails, or when it ends and the next phase is not in the same approved downtime window
(graph/window.py: back-to-back phases that stop production share one stop and one restart), waiting for the deep
health check. While it is stopped a record sits in the run folder (owner-only), written before the stop, so a run
that dies meanwhile says so; the next phase of a window finds it and does not stop again; the report (after a reject
or an abort) and `eyas resume` (before anything else) start production from that record.
Each stop ends as one line of production.jsonl: when it stopped, when it was healthy again, the downtime.
The deploy phase (graph/phases/deploy/node.py) writes the same record, with the drop-in it adds, before it touches
production: restoring from such a record is a rollback (the drop-in removed, a restart, the old argv checked), so
a run that dies mid-deploy never leaves production down or half-changed.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import Node, RunContext
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState, run_plan
from eyas.graph.window import span, stays_down, window_of
from eyas.tools.private_files import open_private, write_private
from eyas.tools.service.base import Service
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import rollback
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.thresholds import Thresholds

RECORD = "production-stopped.json"
LOG = "production.jsonl"
# The motivating service takes ~22 minutes to load; a start that has not passed the health check in an hour
# has failed, and the record stays so `eyas resume` tries again.
RESTART_TIMEOUT_S = 3600.0


def production_action(state: RunState, phase: str) -> str:
    """keep | stop | reuse, as the plan decided for the phase; a plan without the key keeps production."""
    impact = run_plan(state).production(phase)
    return impact.action if impact is not None else "keep"


def stop_for_phase(ctx: RunContext, state: RunState, phase: str) -> None:
    """Stop production for `phase` when the plan says so. A re-run launch node finds the record and stops once."""
    record = ctx.run.root / RECORD
    if production_action(state, phase) != "stop" or record.exists():
        return
    service = production_service(ctx.config, ctx.host, ctx.http, ctx.clock)
    window = window_of(run_plan(state), phase)
    # The record first: a controller that dies during the stop still knows production must come back.
    write_record(ctx, service, phase, window=span(window) if window is not None else None)
    ctx.on_note(f"production: stopping {service.name} ({service.backend}) for the {phase} phase")
    service.stop()
    ctx.on_note(f"production: {service.name} stopped; the {phase} phase has the host")


def write_record(
    ctx: RunContext,
    service: Service,
    phase: str,
    deploying: DeployResult | None = None,
    window: list[str] | None = None,
) -> None:
    """The record that production is, or may be, down because of this run; a deploy's names what it adds, a
    window's stop the phases it is for."""
    stopped: dict[str, Any] = {
        "phase": phase,
        "service": service.name,
        "backend": service.backend,
        "stopped_at": ctx.clock.now(),
    }
    if window is not None and len(window) > 1:
        stopped["window"] = window
    if deploying is not None:
        stopped["deploying"] = deploying.model_dump()
    write_private(ctx.run.root / RECORD, json.dumps(stopped) + "\n")


def restore(ctx: RunContext, why: str) -> dict[str, Any] | None:
    """Start production again if this run stopped it (or roll back a deploy it did not finish), wait until it is
    healthy, and log the downtime."""
    record = ctx.run.root / RECORD
    if not record.exists():
        return None
    stopped = json.loads(record.read_text())
    service = production_service(ctx.config, ctx.host, ctx.http, ctx.clock)
    deploying = stopped.pop("deploying", None)
    if deploying is not None:
        # Whatever the deploy had done (the drop-in written or not, production restarted or not), take out
        # exactly what it adds and restart with the old command line.
        ctx.on_note(f"production: rolling back the unfinished deploy on {service.name} ({why})")
        planned = DeployResult.model_validate(deploying)
        rollback(service, Thresholds(ready_timeout_s=RESTART_TIMEOUT_S), ctx.on_note, planned)
        health = service.health()
    else:
        ctx.on_note(f"production: starting {service.name} again ({why})")
        service.start()
        health = service.wait_healthy(RESTART_TIMEOUT_S, ctx.on_note)
    healthy_at = ctx.clock.now()
    entry = log_stop(
        ctx,
        {
            **stopped,
            "healthy_at": healthy_at,
            "downtime_s": round(healthy_at - stopped["stopped_at"], 1),
            "load_s": service.last_start_s,
            "restarted_because": why,
            "health": health.message,
        },
    )
    record.unlink()
    ctx.on_note(f"production: {service.name} healthy again after {entry['downtime_s']:.0f} s of downtime")
    return entry


def log_stop(ctx: RunContext, entry: dict[str, Any]) -> dict[str, Any]:
    """One line of production.jsonl: a stop (or a restart) of production and its downtime."""
    with open_private(ctx.run.root / LOG, "a") as log:
        log.write(json.dumps(entry) + "\n")
    return entry


def summary(run: RunDir) -> dict[str, Any]:
    """What the state and the report keep: whether production is stopped now, and each past stop."""
    log = run.root / LOG
    stops = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    return {"stopped_now": (run.root / RECORD).exists(), "stops": stops}


def stopping_production(phase: str, launch: Node) -> Node:
    """The phase's launch, preceded by stopping production when the plan says the phase cannot share the host."""

    def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        stop_for_phase(runtime.context, state, phase)
        return launch(state, runtime)

    node.__name__ = f"launch_{phase}"
    return node


def restoring_production(name: str, monitor: Node, why: str = "the phase ended", phase: str | None = None) -> Node:
    """The phase's monitor (or the report), followed by starting production again if the run stopped it, unless
    `phase` ended well and the next phase is in the same approved downtime window."""

    def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        update = monitor(state, runtime)
        ctx = runtime.context
        following = None if update.get("failure") or phase is None else stays_down(state, phase)
        if following is not None and (ctx.run.root / RECORD).exists():
            ctx.on_note(f"production: stays stopped for the {following} phase (the same downtime window)")
            return {**update, "production": summary(ctx.run)}
        restored = restore(ctx, "the phase failed" if update.get("failure") else why)
        if restored is not None or (ctx.run.root / LOG).exists():
            update = {**update, "production": summary(ctx.run)}
        return update

    node.__name__ = name
    return node


def stop_start_commands(ctx: RunContext) -> tuple[str, str]:
    """How production is stopped and started again: systemctl, or the stand-in where systemd is not PID 1."""
    target = ctx.config.target
    if target.unit:
        return shlex.join(["systemctl", "stop", target.unit]), shlex.join(["systemctl", "start", target.unit])
    unit_file = target.unit_file or "(no unit file configured)"
    return (
        f"stand-in for systemd (no systemd here): stop the job running {unit_file}'s ExecStart",
        f"stand-in for systemd (no systemd here): run {unit_file}'s ExecStart with its Environment= as a job",
    )
