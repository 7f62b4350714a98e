"""Terminal output shared by the commands: the consoles, JSON results, one paragraph per error, step spinners."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stdout
from types import TracebackType
from typing import IO, Any, cast

from pydantic_core import to_jsonable_python
from rich.console import Console, Group
from rich.markup import escape
from rich.measure import Measurement
from rich.status import Status as Spinner
from rich.table import Table
from rich.text import Text

from eyas.tools.recording.redact import Redactor
from eyas.tools.recording.redacted_stream import RedactedStream
from eyas.tools.recording.visible import visible


class HostTextConsole(Console):
    """A rich console that shows, and never passes on, the control characters of what it prints: every string
    it renders (markup, a table's cells and titles, plain text) has them made visible before markup is parsed, so a
    host's ESC sequence in a transcript or a log tail reaches the terminal as the text `\\x1b`. Its own styling
    goes out through the standard stream's redacting-only side (RedactedStream.styled)."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(visible(text), **options)

    def print(self, *objects: Any, **options: Any) -> None:
        """A table that goes to a pipe or a file (`eyas runs > runs.txt`) is as wide as its cells, so that no run
        id, path or job id in it is cut with "…" at the terminal's width; at a terminal it fits the terminal. Text
        that goes there is not wrapped at all: a log has no width, and rich's default 80 columns would break a
        figure from its unit ("25.2" and "s)" on two lines) or a path in two."""
        parts = [part for item in objects for part in (item.renderables if isinstance(item, Group) else [item])]
        tables = [part for part in parts if isinstance(part, Table)]
        if self.is_terminal:
            super().print(*objects, **options)
            return
        if not tables:
            super().print(*objects, **{"soft_wrap": True, **options})
            return
        unbounded = self.options.update_width(UNBOUNDED_WIDTH)
        needed = max(Measurement.get(self, unbounded, table).maximum for table in tables)
        chosen = self._width  # rich caps a print's width= at the console's, so the console widens for this print
        self.width = max(self.width, needed)
        try:
            super().print(*objects, **options)
        finally:
            self._width = chosen

    @property
    def file(self) -> IO[str]:
        file = super().file
        return cast(IO[str], file.styled) if isinstance(file, RedactedStream) else file

    @file.setter
    def file(self, new_file: IO[str]) -> None:
        self._file = new_file


UNBOUNDED_WIDTH = 100_000  # wider than any table's cells: measured at this width, a table asks for all they need
# No caller's source location beside a line (log_path): "server.py:100" in an operator's log is noise.
console = HostTextConsole(log_path=False)
errors = HostTextConsole(stderr=True, log_path=False)


def print_json(value: object) -> None:
    """A command's --json output, redacted as a value before it is serialised: a secret that is one item of a list
    (an argv's `--api-key`, then its value) or a field that only its name marks lands on a line of its own in JSON,
    where the line-by-line redaction of the output stream no longer sees what it belongs to."""
    print(json.dumps(Redactor().value(to_jsonable_python(value)), indent=2))


@contextmanager
def json_result(as_json: bool) -> Iterator[dict[str, Any]]:
    """A command's result, which it fills in as it goes: with --json, printed as JSON on the way out (an exit
    status included), while all the command says along the way goes to stderr, so that stdout is the JSON alone."""
    result: dict[str, Any] = {}
    try:
        with redirect_stdout(sys.stderr) if as_json else nullcontext():
            yield result
    finally:
        if as_json and result:
            print_json(result)


def print_error(message: str) -> None:
    """One paragraph; the message is shown as written (a `[hosts]` in it is text, not rich markup)."""
    errors.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def say(text: str) -> None:
    """One line on stdout as written, and whole (never cut at the terminal's width: argvs and paths are copied from
    here): no markup, no highlighting, no time or source location beside it."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def say_next_steps(steps: list[str]) -> None:
    """A run's next steps (graph/phases/report/next_step.py) as its last screen and `eyas status` say them: the
    first is the next step, the others follow it."""
    from eyas.graph.phases.report.next_step import labelled  # the graph's modules: not at every command's start

    for label, step in labelled(steps):
        say(f"{label}: {step}")


def notice(message: str) -> None:
    """A dim line on stderr: context for the operator that never mixes into a command's --json output."""
    errors.print(message, style="dim", markup=False, highlight=False, soft_wrap=True)


def decision_text(decision: dict[str, Any]) -> tuple[str, str]:
    """A gate's decision in words, as ('gate deploy: approve', 'by operator: fits the budget'); a decision without a
    reason (an approval typed at the gate) ends at who made it, and one without a name reads as the operator's."""
    action = decision.get("action") or "no decision"
    reason = decision.get("reason")
    by = f"by {decision.get('who') or 'operator'}" + (f": {reason}" if reason else "")
    return f"gate {decision.get('gate') or 'of an unknown phase'}: {action}", by


class Steps:
    """Prints each step of a long operation with a live spinner, then its duration when the next begins."""

    def __init__(self) -> None:
        self._spinner: Spinner | None = None
        self._current: str | None = None
        self._started = 0.0

    def __call__(self, message: str) -> None:
        self._finish()
        self._current, self._started = message, time.monotonic()
        self._spinner = console.status(visible(escape(message)))  # a spinner's text skips render_str
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
