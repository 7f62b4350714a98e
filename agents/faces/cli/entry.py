"""Where the `eyas` program starts. `eyas --version` is answered here, before the command line and its libraries
(typer, rich, pydantic, httpx) are imported: scripts and shell prompts that ask for it do not wait for them. The
commands that read runs and jobs, run every few seconds under `watch`, get an app of their own (cli/reading.py)
that imports only what they need."""

from __future__ import annotations

import sys

import eyas

READING = ("status", "runs", "jobs")  # the commands of cli/reading.py's app


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"eyas {eyas.__version__}")
        return
    if sys.argv[1:2] and sys.argv[1] in READING:
        from eyas.agents.faces.cli.reading import main as reading

        reading(sys.argv[1])
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
