"""The terminal side of a run: node updates, gates passed and why, job progress bars, questions at gates."""

from __future__ import annotations

import select
import sys
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.prompt import IntPrompt, Prompt
from rich.table import Column, Table

from eyas.agents.faces.cli.console import console, decision_text
from eyas.agents.faces.gate_text import gate_sections, gate_title
from eyas.agents.faces.progress_lines import ProgressLines
from eyas.agents.faces.progress_text import count_text, detail_text
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.shard_total import phase_total
from eyas.graph.state import GateAnswer
from eyas.tools.jobs.detached import JobState, JobStatus
from eyas.tools.jobs.job_progress import merged
from eyas.tools.settings.config import format_validation_error
from eyas.tools.settings.sizes import Sizes, SizeValue, typed_size


class RunUI:
    def __init__(self, terminal: Console = console, *, bars: bool | None = None) -> None:
        """`bars`: live progress bars (default: where the output is a terminal); else plain lines, for a log file or
        CI, where a bar would show only its final state (agents/faces/progress_lines.py)."""
        self._console = terminal
        self._progress: Progress | None = None
        self._bars: dict[str, TaskID] = {}
        self._seen: dict[str, dict[str, Any]] = {}  # each job's progress so far (progress_text.merged)
        live = terminal.is_terminal if bars is None else bars
        self._lines = None if live else ProgressLines(self._plain)

    def _plain(self, line: str) -> None:
        self._console.print(line, markup=False, highlight=False, soft_wrap=True)

    # -- what happened ---------------------------------------------------------------------------

    def note(self, message: str) -> None:
        self._stop_bars()
        self._console.print(f"[dim]·[/] {escape(message)}", highlight=False)

    def update(self, update: dict[str, Any]) -> None:
        for node, change in update.items():
            if node == "__interrupt__" or not isinstance(change, dict):
                continue
            for decision in change.get("decisions", []):
                self._stop_bars()
                style = "green" if decision["action"] in ("approve", "retry") else "yellow"
                gate, by = decision_text(decision)
                self._console.print(f"[{style}]{escape(gate)}[/] {escape(by)}", highlight=False)

    # -- progress of jobs ------------------------------------------------------------------------

    def progress(self, phase: str, states: list[JobState], progress: dict[str, dict[str, Any]]) -> None:
        """Each job's bar with what it counts (a training's steps, an evaluation's prompts) and its figures (loss,
        tokens/s), kept from its earlier lines when its last one lacks them (a finished training's last line is
        its `done`); a sharded phase's whole below its jobs."""
        if self._progress is None and self._lines is None:
            self._progress = Progress(
                TextColumn("{task.description}", table_column=Column(overflow="fold")),
                BarColumn(bar_width=20),
                TextColumn("{task.fields[count]}", table_column=Column(overflow="fold")),
                TextColumn("{task.fields[extra]}", table_column=Column(overflow="fold")),
                TimeRemainingColumn(),
                console=self._console,
            )
            self._progress.start()
        for state in states:
            seen = self._seen[state.job_id] = merged(self._seen.get(state.job_id, {}), progress.get(state.job_id, {}))
            said = "" if state.status is JobStatus.RUNNING else state.describe()
            extra = ", ".join(part for part in (said, detail_text(seen)) if part)
            self._bar(state.job_id, seen, extra, finished=state.finished)
        whole = phase_total([self._seen.get(state.job_id, {}) for state in states])
        if whole is not None:  # a sharded phase: its whole, below its jobs
            finished = all(state.finished for state in states)
            self._bar(f"{phase}: all {whole['jobs']} jobs", whole, detail_text(whole), finished=finished)

    def _bar(self, name: str, seen: dict[str, Any], extra: str, *, finished: bool) -> None:
        """A bar as full as the count says; without a count, a pulse while the job runs and full once it ended (a
        line where no bar can be drawn)."""
        if self._lines is not None:
            self._lines.update(name, seen, extra, finished=finished)
            return
        assert self._progress is not None
        total = float(seen["total"]) if seen.get("total") else (1.0 if finished else None)
        done = float(seen.get("done") or 0) if seen.get("total") else (1.0 if finished else 0.0)
        count = count_text(seen)
        if name not in self._bars:
            self._bars[name] = self._progress.add_task(name, total=total, count=count, extra=extra)
        self._progress.update(self._bars[name], total=total, completed=done, count=count, extra=extra)

    def _stop_bars(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress, self._bars = None, {}

    # -- questions at gates ----------------------------------------------------------------------

    def ask(self, view: dict[str, Any], answered_elsewhere: Callable[[], GateAnswer | None]) -> GateAnswer:
        self._stop_bars()
        shown = read_view(view)
        self._console.print(gate_panel(shown))
        choices = shown.actions
        self._console.print(f"[bold]{' / '.join(choices)}?[/] (or answer from another terminal with `eyas approve`)")
        while True:
            line = _read_line_or(answered_elsewhere)
            if isinstance(line, GateAnswer):
                self._console.print(f"answered elsewhere: {line.action}")
                return line
            action = next((choice for choice in choices if choice == line.strip().lower()), None)
            if action is not None:
                break
            self._console.print(f"please type one of: {', '.join(choices)}")
        if action == "edit" and isinstance(shown, GateView):
            return GateAnswer(action=action, reason="sizes edited at the gate", sizes=_edit_sizes(shown.sizes))
        reason = Prompt.ask("reason", default="") if action in ("reject", "abort") else ""
        return GateAnswer(action=action, reason=reason)


def _edit_sizes(current: dict[str, SizeValue]) -> dict[str, SizeValue]:
    """Ask for each size (Enter keeps it) until the whole set is valid, so the gate never refuses the edit."""
    while True:
        edited: dict[str, SizeValue] = {
            key: IntPrompt.ask(key, default=value)
            if isinstance(value, int) and not isinstance(value, bool)
            else Prompt.ask(key, default=typed_size(value))
            for key, value in current.items()
        }
        try:
            return Sizes.model_validate(edited).model_dump()
        except ValidationError as exc:
            console.print(f"[red]not valid:[/] {escape('; '.join(format_validation_error(exc)))}", highlight=False)
            current = edited


def _read_line_or(answered_elsewhere: Callable[[], GateAnswer | None]) -> str | GateAnswer:
    """Wait for a line on stdin, checking once a second whether another terminal answered instead."""
    while True:
        elsewhere = answered_elsewhere()
        if elsewhere is not None:
            return elsewhere
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready:
            line = sys.stdin.readline()
            if not line:
                raise EOFError("stdin closed while a gate was waiting for an answer")
            return line


def gate_panel(view: GateView | FailureView) -> Panel:
    """The gate's sections (agents/faces/gate_text.py, as the dashboard and the chat show them) as rows of label and
    text; a long command folds onto the next line rather than being cut."""
    table = Table.grid(padding=(0, 2))
    table.add_column()
    table.add_column(overflow="fold")
    for section in gate_sections(view):
        for line in section.lines:
            label = f"[bold red]{escape(line.label)}[/]" if line.alarm else f"[bold]{escape(line.label)}[/]"
            table.add_row(label, escape(line.text))
    border = "red" if isinstance(view, FailureView) else "cyan"
    return Panel(table, title=escape(gate_title(view)), border_style=border)
