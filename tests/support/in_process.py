"""The real `eyas` command line run in this process: its entry point, its error handling and exit codes, without
the seconds each new Python process spends importing eyas (and with arguments no exec can pass, such as NUL)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from typer.testing import CliRunner

from eyas.agents.faces.cli.main import main


@dataclass(frozen=True)
class Ran:
    code: int
    output: str  # stdout and stderr together, as a terminal shows them
    stdout: str  # alone, as a script that reads --json gets it


def eyas(*args: str, env: dict[str, str] | None = None) -> Ran:
    """`eyas ARGS` as the console script runs it; an exception that escapes it fails the calling test."""
    with CliRunner().isolation(env={"COLUMNS": "400", **(env or {})}) as (stdout, _, output):
        try:
            main(list(args))
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        sys.stdout.flush()  # print() is buffered in the isolation's streams; rich's console writes through
        sys.stderr.flush()
        return Ran(code, output.getvalue().decode(errors="replace"), stdout.getvalue().decode(errors="replace"))
