"""The last line of `eyas show`'s timeline: how many events of which kinds, over how long, the errors, the refusals a
restart explains, the gates and what was left out; as data for --json and in words for a person."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field
from rich.markup import escape

from eyas.tools.recording.transcript import ApprovalEvent, CommandEvent, Crossing, Event, NodeEvent


class Summary(BaseModel):
    """The timeline's last line, as data for --json and in words for a person."""

    events: int = Field(description="in the transcript")
    shown: int = Field(description="after the filters, without the clock unless asked")
    tasks: int
    span_s: float = Field(description="from the first event's start to the last event's end")
    kinds: dict[str, int] = Field(description="of the shown events, the most frequent first")
    commands_s: float = Field(description="the shown commands' time on their hosts, added up")
    errors: int = Field(description="shown crossings and nodes that failed, the expected refusals not counted")
    expected_refusals: int = Field(description="shown probes refused while a service restarted")
    hidden_clock: int = Field(description="clock reads and sleeps left out (--all shows them)")
    gates: list[dict[str, str | None]]


def summarize(events: Sequence[Event], shown: Sequence[Event], expected: set[int], *, hidden_clock: int) -> Summary:
    """The summary of the `shown` events of a transcript's `events`; `expected`: the seqs of refusals a restart
    explains (agents/faces/expected_refusals.py)."""
    start = min((started_at(event) for event in events), default=0.0)
    failed = [event for event in shown if isinstance(event, Crossing | NodeEvent) and event.error is not None]
    refused = sum(1 for event in failed if event.seq in expected)
    return Summary(
        events=len(events),
        shown=len(shown),
        tasks=len({event.task for event in shown}),
        span_s=max((event.t for event in events), default=start) - start,
        kinds=dict(Counter(event.kind for event in shown).most_common()),
        commands_s=sum(event.duration_s or 0.0 for event in shown if isinstance(event, CommandEvent)),
        errors=len(failed) - refused,
        expected_refusals=refused,
        hidden_clock=hidden_clock,
        gates=[{"gate": gate.gate, "decision": gate.decision} for gate in shown if isinstance(gate, ApprovalEvent)],
    )


def summary_text(summary: Summary) -> str:
    parts = [
        f"{summary.shown} of {summary.events} events",
        count(summary.tasks, "task"),
        f"span {human_duration(summary.span_s) or '0 ms'}",
        ", ".join(f"{number} {name}" for name, number in summary.kinds.items()),
    ]
    if summary.kinds.get("command"):
        parts.append(f"commands took {human_duration(summary.commands_s)} in all")
    if summary.errors:
        parts.append(f"[red]{count(summary.errors, 'error')}[/]")
    if summary.expected_refusals:
        parts.append(
            f"{count(summary.expected_refusals, 'refused probe')} while a service restarted (expected: not counted "
            "as errors)"
        )
    if summary.gates:
        decided = ", ".join(f"{escape(str(gate['gate']))} → {escape(str(gate['decision']))}" for gate in summary.gates)
        parts.append(f"gates: {decided}")
    if summary.hidden_clock:
        parts.append(f"{count(summary.hidden_clock, 'clock read')} hidden (--all shows them)")
    return "; ".join(part for part in parts if part)


def started_at(event: Event) -> float:
    """When the event began: a crossing is recorded when it completed, after its duration."""
    duration = event.duration_s if isinstance(event, Crossing) else None
    return event.t - (duration or 0.0)


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
