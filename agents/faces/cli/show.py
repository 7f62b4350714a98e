"""`eyas show RUN`: what a recorded run did, as a timeline a person reads the morning after."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import JustifyMethod
from rich.markup import escape
from rich.table import Table

from eyas.agents.faces.cli.completion import complete_run_id
from eyas.agents.faces.cli.console import console, errors, print_json
from eyas.agents.faces.cli.flags import JsonOption
from eyas.agents.faces.cli.show_summary import count, human_duration, started_at, summarize, summary_text
from eyas.agents.faces.expected_refusals import expected_refusals
from eyas.graph.runs import transcript_path
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode
from eyas.tools.recording.transcript import (
    ApprovalEvent,
    ClockEvent,
    CommandEvent,
    ControlEvent,
    Crossing,
    Event,
    FileExistsEvent,
    FileReadEvent,
    FileWriteEvent,
    HttpEvent,
    JobLaunchEvent,
    LlmEvent,
    NodeEvent,
    OperatorEvent,
    SearchEvent,
    TcpEvent,
)
from eyas.tools.recording.transcript_reader import SkippedLine, read_transcript

# The widest the "what" column grows in a pipe or file: a job's launch command (its script inline, 4 KB) folds onto
# more lines at this width rather than pad every row of the timeline to its length.
WHAT_WIDTH = 160
DECISION_STYLE = {"approve": "green", "approved": "green", "reject": "bold red", "rejected": "bold red"}


def show_command(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="a run id (see `eyas runs`), a run's folder, or a transcript.jsonl (runs/<run_id>/transcript.jsonl)",
            autocompletion=complete_run_id,
        ),
    ],
    task: Annotated[
        str | None,
        typer.Option("--task", "--phase", help="only this task (a phase or node) and the tasks nested in it"),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="only these kinds (repeatable): command, file (file_read, file_write, file_exists), http, tcp, "
            "clock, llm, search, approval, operator (a chat's typed lines), control, node, job_launch",
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="only events on this host (its name in the config)")
    ] = None,
    everything: Annotated[
        bool,
        typer.Option(
            "--all",
            help="also the clock's reads and sleeps, hidden by default (a run reads the clock hundreds of times; "
            "--kind clock shows them alone)",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help=f"only check the hash chain: name the first altered or removed event (exit {ExitCode.NO.value}), or "
            f"say the transcript is intact or unchained (exit {ExitCode.OK.value})",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Print a recorded run as a timeline: each crossing with its task, what it asked and answered, and how long
    it took; the approval gates with their decisions; a summary line. Warns when the transcript ends in a line
    cut by a crash (the complete events before it are shown) and when its hash chain is broken. A probe of a server
    (a TCP connect, /health, /v1/models) refused while a service restarts (from `systemctl stop/start/restart` or
    the stand-in's job, until a server answers 200) is marked expected and not counted as an error."""
    transcript = transcript_path(run)
    loaded = read_transcript(transcript, keep_unknown=True)
    verdict = loaded.chain.describe(str(transcript))
    if verify:
        if json_output:
            print_json({"transcript": str(transcript), "intact": loaded.chain.intact, "chain": verdict})
        else:
            console.print(escape(verdict), style=None if loaded.chain.intact else "bold red", highlight=False)
        raise typer.Exit(ExitCode.OK if loaded.chain.intact else ExitCode.NO)
    if not loaded.chain.intact:
        errors.print(f"[bold red]warning:[/] {escape(verdict)}", highlight=False, soft_wrap=True)
    if not loaded.events and not loaded.skipped:
        raise EyasError(
            f"{transcript} holds no complete event: the run wrote nothing before it stopped. Pass the transcript of a "
            "run that started (`eyas runs` lists them; each keeps runs/<run_id>/transcript.jsonl)."
        )
    for warning in loaded.warnings:
        errors.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    events = loaded.events
    chosen = [event for event in events if _selected(event, task, kind, host)]
    hide_clock = not everything and "clock" not in (kind or [])
    shown = [event for event in chosen if not (hide_clock and event.kind == "clock")]
    expected = expected_refusals(events)
    summary = summarize(events, shown, expected, hidden_clock=len(chosen) - len(shown))
    if json_output:
        print_json({"transcript": str(transcript), "chain": verdict, "intact": loaded.chain.intact,
                    "warnings": loaded.warnings, "skipped": [line.model_dump() for line in loaded.skipped],
                    "summary": summary.model_dump(),
                    "events": [{**event.model_dump(mode="json"), "expected_refusal": event.seq in expected}
                               for event in shown]})  # fmt: skip
        return
    console.print(_timeline(str(transcript), events, shown, expected, loaded.skipped))
    console.print(summary_text(summary), highlight=False)
    if loaded.skipped:
        errors.print(
            f"[yellow]warning:[/] {count(len(loaded.skipped), 'line')} skipped (marked ?): events of another eyas "
            "version; read them with the eyas that recorded the run.",
            highlight=False,
            soft_wrap=True,
        )


def _timeline(
    title: str, events: Sequence[Event], shown: Sequence[Event], expected: set[int], skipped: Sequence[SkippedLine]
) -> Table:
    """The table: each shown event in its place, the lines this eyas cannot read among them."""
    start = min((started_at(event) for event in events), default=0.0)
    node_starts: dict[tuple[str, str], float] = {}
    table = Table(title=escape(title), title_justify="left", show_lines=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"),
        ("at", "right"),
        ("task", "left"),
        ("kind", "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    table.add_column("what", overflow="fold", max_width=WHAT_WIDTH)
    table.add_column("took", justify="right", no_wrap=True)
    wanted = {event.seq for event in shown}
    for index, event in enumerate(events):
        _mark_skipped(table, skipped, index)
        took = _duration(event, node_starts)  # every event, so a node's end finds its start when filtered out
        if event.seq in wanted:
            table.add_row(
                str(event.seq),
                _clock(started_at(event) - start),
                escape(event.task),
                event.kind,
                _describe(event, event.seq in expected),
                human_duration(took),
            )
    _mark_skipped(table, skipped, len(events))
    return table


def _mark_skipped(table: Table, skipped: Sequence[SkippedLine], before: int) -> None:
    """The lines this eyas cannot read, in their place among the events, each with what is wrong with it."""
    for line in skipped:
        if line.before == before:
            what = f"[yellow]? line {line.line} {escape(line.problem)}[/]"
            table.add_row("?", "", "", escape(line.kind), what, "")


def _selected(event: Event, task: str | None, kinds: list[str] | None, host: str | None) -> bool:
    if task and event.task != task and not event.task.startswith(f"{task}/"):
        return False
    if kinds and not any(event.kind == wanted or event.kind.startswith(f"{wanted}_") for wanted in kinds):
        return False
    return not host or getattr(event, "host", None) == host


def _duration(event: Event, node_starts: dict[tuple[str, str], float]) -> float | None:
    if isinstance(event, NodeEvent):
        key = (event.task, event.node)
        if event.phase == "start":
            node_starts[key] = event.t
            return None
        return event.t - node_starts.pop(key) if key in node_starts else None
    return event.duration_s if isinstance(event, Crossing) else None


def _describe(event: Event, expected: bool) -> str:
    text = _what(event)
    if isinstance(event, Crossing | NodeEvent) and event.error is not None:
        said = f"✗ {escape(event.error.type)}: {escape(_line(event.error.message, 160))}"
        text += f" [dim]{said} (expected: a service was restarting)[/]" if expected else f" [bold red]{said}[/]"
    return text


def _what(event: Event) -> str:
    match event:
        case CommandEvent():
            text = f"[dim]{escape(event.host)}$[/] {escape(_whole_command(event.command))}"
            if event.rc is not None:
                style = "green" if event.rc == 0 else "red"
                text += f" [{style}]→ rc {event.rc}[/]"
                if event.rc != 0 and event.stderr.strip():
                    text += f" [dim]{escape(_line(event.stderr.strip().splitlines()[-1], 100))}[/]"
            return text
        case FileReadEvent() | FileWriteEvent():
            verb = "read" if isinstance(event, FileReadEvent) else "write"
            size = f" ({event.size} B)" if event.size is not None else ""
            return f"[dim]{escape(event.host)}:[/] {verb} {escape(event.path)}{size}"
        case FileExistsEvent():
            answer = "" if event.exists is None else (" → yes" if event.exists else " → no")
            return f"[dim]{escape(event.host)}:[/] exists {escape(event.path)}?{answer}"
        case HttpEvent():
            status = "" if event.status is None else f" → {event.status} ({len(event.body or '')} B)"
            return f"{event.method} {escape(event.url)}{status}"
        case TcpEvent():
            return f"connect {escape(event.url)}"
        case ClockEvent():
            return _clock_read(event)
        case LlmEvent():
            return _llm(event)
        case SearchEvent():
            return f"search “{escape(_line(event.query, 100))}” → {len(event.results)} results"
        case ApprovalEvent():
            style = DECISION_STYLE.get(str(event.decision), "yellow")
            who = f" by {escape(event.who)}" if event.who else ""
            reason = f": {escape(_line(event.reason, 140))}" if event.reason else ""
            return f"gate [bold]{escape(event.gate)}[/] [{style}]{escape(str(event.decision))}[/]{who}{reason}"
        case OperatorEvent():
            typed = "[dim](left the chat)[/]" if event.closed else f"“{escape(_line(event.text or '', 120))}”"
            return f"[bold]operator[/] {escape(event.prompt.strip())} {typed}"
        case ControlEvent():
            args = ", ".join(f"{key}={value!r}" for key, value in event.args.items())
            return f"pipeline {escape(event.method)}({escape(args)}) → “{escape(_line(event.result or '', 100))}”"
        case NodeEvent():
            return f"{'▶' if event.phase == 'start' else '■'} node [bold]{escape(event.node)}[/] {event.phase}"
        case JobLaunchEvent():
            status = event.state.get("status", "?") if isinstance(event.state, dict) else "?"
            return (
                f"[dim]{escape(event.host)}:[/] launch job [bold]{escape(event.job_id)}[/]: "
                f"{escape(shlex.join(event.argv))} → {escape(str(status))}"
            )
    return escape(event.kind)


def _clock_read(event: ClockEvent) -> str:
    if event.op == "sleep":
        return f"sleep {event.seconds:g} s"
    if event.op == "now" and event.value is not None:
        try:
            return f"now → {datetime.fromtimestamp(event.value, UTC).isoformat(timespec='seconds')}"
        except (ValueError, OverflowError, OSError):
            pass  # a reading no calendar holds: shown as the number it is
    return f"{event.op} → {event.value}"


def _llm(event: LlmEvent) -> str:
    messages = event.request.get("messages") or []
    last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    asked = f"{escape(str(event.request.get('model', '?')))}: “{escape(_line(str(last or ''), 80))}”"
    return f"{asked} → “{escape(_line(_llm_answer(event.response), 80))}”"


def _llm_answer(response: Any) -> str:
    """The text or tool calls of an OpenAI-style answer; anything else shown as it is."""
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return str(response)
    calls = [call.get("function", {}).get("name", "?") for call in message.get("tool_calls") or []]
    return message.get("content") or ("tool calls: " + ", ".join(calls) if calls else "")


def _whole_command(command: str) -> str:
    """A command whole, as it ran (the table folds it at the terminal's width, so it can be copied); only eyas's
    own inline scripts (`python -c '...'` over many lines) show their first line and how many more the transcript
    keeps, so that one status poll is not a page of shell."""
    first, *rest = command.splitlines() or [""]
    return f"{first} [{len(rest)} more lines of inline script in the transcript]" if rest else command


def _line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _clock(seconds: float) -> str:
    minutes, rest = divmod(max(seconds, 0.0), 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}:{minutes:02d}:{rest:06.3f}" if hours else f"{minutes:02d}:{rest:06.3f}"
