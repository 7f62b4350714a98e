"""Terminal output shared by the commands: tables for status, one paragraph per error, step spinners."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.status import Status as Spinner
from rich.table import Table

from eyas.tools.checks.result import Status
from eyas.tools.checks.verify import VerifyReport

console = Console()
errors = Console(stderr=True)

STATUS_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red"}


def print_error(message: str) -> None:
    """One paragraph; the message is shown as written (a `[hosts]` in it is text, not rich markup)."""
    errors.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def notice(message: str) -> None:
    """A dim line on stderr: context for the operator that never mixes into a command's --json output."""
    errors.print(message, style="dim", markup=False, highlight=False, soft_wrap=True)


def verify_table(report: VerifyReport, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("finding", overflow="fold")
    for result in report.results:
        style = STATUS_STYLE[result.status]
        status = f"[{style}]{result.status.value}[/]"
        table.add_row(escape(result.name), status, f"{result.duration_s:.2f}s", escape(result.message))
    table.caption = f"wall {report.wall_s:.2f} s for checks that sum to {report.sum_of_checks_s:.2f} s (concurrent)"
    return table


class Steps:
    """Prints each step of a long operation with a live spinner, then its duration when the next begins."""

    def __init__(self) -> None:
        self._spinner: Spinner | None = None
        self._current: str | None = None
        self._started = 0.0

    def __call__(self, message: str) -> None:
        self._finish()
        self._current, self._started = message, time.monotonic()
        self._spinner = console.status(escape(message))
        self._spinner.start()

    def _finish(self) -> None:
        if self._spinner is not None and self._current is not None:
            self._spinner.stop()
            console.print(f"[green]✓[/] {escape(self._current)} [dim]({time.monotonic() - self._started:.1f} s)[/]")
        self._spinner = self._current = None

    def __enter__(self) -> Steps:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self._finish()
        elif self._spinner is not None:
            self._spinner.stop()
            console.print(f"[red]✗[/] {escape(self._current or '')}")
