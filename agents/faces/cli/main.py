"""The `eyas` command line: a thin skin over the library in tools/ (and the graph, as it lands)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.chat import chat_command
from eyas.agents.faces.cli.console import console, json_result, notice
from eyas.agents.faces.cli.demo import demo_command
from eyas.agents.faces.cli.deploy import deploy_command, rollback_command
from eyas.agents.faces.cli.flags import JsonOption
from eyas.agents.faces.cli.jobs import jobs_app
from eyas.agents.faces.cli.plan import plan_command
from eyas.agents.faces.cli.publish import publish_command
from eyas.agents.faces.cli.replay import replay_command
from eyas.agents.faces.cli.report import report_command
from eyas.agents.faces.cli.research import research_command
from eyas.agents.faces.cli.root import root_app, run_app
from eyas.agents.faces.cli.run import (
    approve_command,
    graph_command,
    resume_command,
    run_command,
)
from eyas.agents.faces.cli.show import show_command
from eyas.agents.faces.cli.status import add_run_readers
from eyas.agents.faces.cli.target import app as target_app
from eyas.agents.faces.cli.ui import ui_command
from eyas.agents.faces.cli.verify import verify_command
from eyas.agents.faces.cli.watch import watch_command
from eyas.tools.config_source import LOCAL_FILE, locate_config
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode, exit_codes_help
from eyas.tools.settings.config import config_problems

app = root_app()
OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE, NOT_FOUND = ExitCode
config_app = typer.Typer(
    help="Write and validate configuration files.", epilog=exit_codes_help(OK, NO, USAGE), no_args_is_help=True
)
app.add_typer(config_app, name="config")
app.add_typer(target_app, name="target")
app.add_typer(jobs_app, name="jobs")
app.command("run", epilog=exit_codes_help(OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE))(run_command)
app.command("resume", epilog=exit_codes_help(OK, NO, USAGE, GATE, ROLLED_BACK, UNREACHABLE, NOT_FOUND))(resume_command)
app.command("approve", epilog=exit_codes_help(OK, USAGE, NOT_FOUND))(approve_command)
add_run_readers(app)
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
app.command("verify", epilog=exit_codes_help(OK, NO, USAGE, UNREACHABLE))(verify_command)


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


def main(argv: list[str] | None = None) -> None:
    """The `eyas` command; `argv` (default: the process's arguments) lets tests run it in-process."""
    run_app(app, argv)
