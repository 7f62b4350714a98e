"""Every command's help ends with its exit table (issue 41): each `eyas` command and subcommand registered has one,
its rows are the enum's own (tools/exit_codes.py, no second copy of a number or a meaning), and a group lists every
status its subcommands can exit with. Read from the real command tree typer builds, so a command added later without
a table fails here."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from eyas.agents.faces.cli.main import app
from eyas.tools.exit_codes import ExitCode, exit_codes_help


def commands(command: Any, path: str = "eyas") -> dict[str, Any]:
    """`command` and everything below it, by the words that call it."""
    found = {path: command}
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            found.update(commands(sub, f"{path} {name}"))
    return found


def listed(command: Any) -> tuple[ExitCode, ...]:
    """The statuses an epilog lists, in its order; fails on a row that is not the enum's."""
    epilog = command.epilog or ""
    assert epilog.startswith("\b\nExit status:\n"), f"{command.name}: no exit table in {epilog!r}"
    rows = epilog.split("\n")[2:]
    codes = tuple(ExitCode(int(row.split()[0])) for row in rows)
    assert epilog == exit_codes_help(*codes), f"{command.name}: a row differs from the enum's"
    return codes


def test_every_command_has_its_exit_table_from_the_enum() -> None:
    tree = commands(typer.main.get_command(app))
    assert {"eyas approve", "eyas status", "eyas jobs tail", "eyas target up", "eyas config init"} <= set(tree)
    for path, command in tree.items():
        codes = listed(command)
        assert list(codes) == sorted(set(codes)), f"{path}: {codes} repeats or is out of order"
        # Every command can be given a bad flag (2), and says done (0) when it is.
        assert {ExitCode.OK, ExitCode.USAGE} <= set(codes), path
        if isinstance(command, TyperGroup):
            below = {code for sub in command.commands.values() for code in listed(sub)}
            assert below <= set(codes), f"{path} lists {codes} but its commands exit with {sorted(below)}"


def test_the_run_and_resume_tables_hold_a_rollback() -> None:
    tree = commands(typer.main.get_command(app))
    for path in ("eyas run", "eyas resume", "eyas deploy"):
        assert ExitCode.ROLLED_BACK in listed(tree[path]), path
    assert ExitCode.ROLLED_BACK not in listed(tree["eyas status"])
