"""Where the `eyas` program starts. `eyas --version` is answered here, before the command line and its libraries
(typer, rich, pydantic, httpx) are imported: scripts and shell prompts that ask for it do not wait for them."""

from __future__ import annotations

import sys

import eyas


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"eyas {eyas.__version__}")
        return
    from eyas.agents.faces.cli.main import main as command_line

    command_line()


def __getattr__(name: str) -> object:
    """`app`, the typer app, for tools that find an entry point's app beside its main() (a common typer layout;
    tools/workloads/cli_help.py reads every subcommand's --help that way), imported only when asked for."""
    if name == "app":
        from eyas.agents.faces.cli.main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
