"""`eyas jobs`: the jobs on the target's host (or its Ray cluster), their logs, and stopping one."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import console, print_json
from eyas.agents.faces.cli.flags import ConfigOption, HostOption, JsonOption
from eyas.agents.faces.cli.options import use_config
from eyas.tools.exit_codes import ExitCode, exit_codes_help
from eyas.tools.hosts.connect import open_host
from eyas.tools.jobs.executor import JobExecutor, jobs_of

OK, USAGE, UNREACHABLE = ExitCode.OK, ExitCode.USAGE, ExitCode.UNREACHABLE
jobs_app = typer.Typer(
    help="The jobs a run launched (detached on a host, or on a Ray cluster): list, read logs, cancel.",
    epilog=exit_codes_help(OK, USAGE, UNREACHABLE),
    invoke_without_command=True,
)


@contextmanager
def job_executor(ctx: typer.Context) -> Iterator[JobExecutor]:
    """The jobs of `--host`, or of the run's executor: the target host's detached jobs, or the Ray cluster's that
    `[cluster] executor = "ray"` sends them to (their records live on the target host)."""
    config, host = ctx.obj
    cfg, _ = use_config(config)
    name = host or cfg.target.host
    with open_host(name, cfg.host(name)) as machine:
        yield jobs_of(cfg, name, machine)


@jobs_app.callback()
def jobs_list(
    ctx: typer.Context, config: ConfigOption = None, host: HostOption = None, as_json: JsonOption = False
) -> None:
    """List the jobs of the target's host, or of the Ray cluster a `[cluster]` section names, with their state."""
    ctx.obj = (config, host)
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    with job_executor(ctx) as jobs:
        states = jobs.list()
    if as_json:
        print_json([state.model_dump(mode="json") for state in states])
        return
    where = states[0].host if states else (host or "the target's host")
    table = Table(title=escape(f"jobs on {where}"), title_justify="left")
    for column in ("job", "state", "pid", "records"):
        table.add_column(column)
    for state in states:
        cells = (state.job_id, state.describe(), str(state.pid or ""), state.directory)
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)


@jobs_app.command("tail", epilog=exit_codes_help(OK, USAGE, UNREACHABLE))
def jobs_tail(
    ctx: typer.Context,
    job_id: str,
    lines: Annotated[int, typer.Option("--lines", "-n", help="how many lines")] = 50,
) -> None:
    """Print the end of a job's log (from Ray, for a Ray job)."""
    with job_executor(ctx) as jobs:
        sys.stdout.write(jobs.tail(job_id, lines))


@jobs_app.command("cancel", epilog=exit_codes_help(OK, USAGE, UNREACHABLE))
def jobs_cancel(ctx: typer.Context, job_id: str, json_output: JsonOption = False) -> None:
    """Stop a job: a detached job's whole process group (SIGTERM, then SIGKILL after 10 s); a Ray job through Ray."""
    with job_executor(ctx) as jobs:
        state = jobs.cancel(job_id)
    if json_output:
        print_json(state.model_dump(mode="json"))
        return
    console.print(f"{job_id}: {state.describe()}", markup=False)
