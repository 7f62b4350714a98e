"""`eyas verify`: the live state of the target host, every check at once, as a table or JSON."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from eyas.agents.faces.cli.console import console, print_json
from eyas.agents.faces.cli.flags import ConfigOption, HostOption, JsonOption
from eyas.agents.faces.cli.options import use_config
from eyas.tools.checks.result import Status, config_checks
from eyas.tools.checks.verify import CHECKS, VerifyReport, verify
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient

STATUS_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


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
    failed = ExitCode.NO if report.worst is Status.FAIL else ExitCode.OK
    raise typer.Exit(ExitCode.UNREACHABLE if report.unreachable else failed)


def verify_table(report: VerifyReport, title: str) -> Group:
    """The checks as a table; those an unreachable host stopped (their finding is, or quotes, the host's paragraph)
    leave it for that paragraph, said once, and one line naming them."""
    unreachable = next((result.message for result in report.results if result.facts.get("unreachable")), None)
    skipped = [result.name for result in report.results if unreachable and unreachable in result.message]
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("finding", overflow="fold")
    for result in report.results:
        if result.name in skipped:
            continue
        style = STATUS_STYLE[result.status]
        status = f"[{style}]{result.status.value}[/]"
        table.add_row(escape(result.name), status, f"{result.duration_s:.2f}s", escape(result.message))
    table.caption = f"wall {report.wall_s:.2f} s for checks that sum to {report.sum_of_checks_s:.2f} s (concurrent)"
    if unreachable is None:
        return Group(table)
    said = Text.assemble(("host unreachable: ", "bold red"), unreachable)
    names = Text.assemble(("not checked", "bold red"), f" (they need the host): {', '.join(skipped)}")
    return Group(*([table] if table.row_count else []), said, names)
