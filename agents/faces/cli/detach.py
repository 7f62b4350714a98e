"""`--detach` for `eyas run` and `eyas resume`: the same command, started as the run's detached driver job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eyas.graph.life.driver import driver_log, start_driver
from eyas.graph.life.heartbeat import HEARTBEAT_INTERVAL_S, STALE_AFTER_BEATS
from eyas.graph.runs import RunDir

DetachOption = Annotated[
    bool,
    typer.Option(
        "--detach",
        help="drive the run from a detached job on this machine (it outlives this terminal and an SSH logout), "
        f"beating a heartbeat into runs/RUN/heartbeat.json every {HEARTBEAT_INTERVAL_S:g} s; print its run id and "
        "log, and return. Without a --policy it stops at the first gate (answer with `eyas approve`, then "
        "`eyas resume --detach`). `eyas watch` restarts it if it dies",
    ),
]


def same_command(context: typer.Context, *, without: set[str]) -> list[str]:
    """The command line of `context` again, with the options given on it except those named in `without`; paths
    made absolute, so that it means the same from any folder."""
    args = [context.info_name or ""]
    for param in context.command.params:
        name = param.name
        # Typer carries its own copy of click, so its classes are known here by their names, not imported.
        if name is None or name in without or param.param_type_name != "option":
            continue
        source = context.get_parameter_source(name)
        if source is None or source.name != "COMMANDLINE":
            continue
        value = context.params[name]
        if getattr(param, "is_flag", False):
            args += (param.opts if value else param.secondary_opts)[:1]
        elif value is not None:
            args += [param.opts[0], str(value.resolve() if isinstance(value, Path) else value)]
    return args


def detach_driver(run: RunDir, args: list[str]) -> None:
    """Start `eyas ARGS` as the run's detached driver and say how to follow it."""
    started = start_driver(run, args)
    log = driver_log(started)
    typer.echo(f"run {run.run_id}: driven by a detached eyas (job {started.job_id}, pid {started.pid})")
    typer.echo(f"log: {log}")
    typer.echo(
        f"follow it: eyas status {run.run_id} (its heartbeat age; a driver is stale after "
        f"{HEARTBEAT_INTERVAL_S * STALE_AFTER_BEATS:g} s without one), tail -f {log}\n"
        f"keep it alive: eyas watch {run.run_id} (restarts it if it dies; `eyas watch --install-unit` for a "
        "systemd user service)"
    )
