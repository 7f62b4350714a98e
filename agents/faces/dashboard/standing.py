"""Where a run stands, in the words the dashboard leads with: on the run list, its outcome, production's speedup,
how long it has been quiet and the gate it waits at (those first); on the run page, the outcome line and the next
step as `eyas status` says them, or the gate it waits at for an answer. Pure functions of what the run folder says
(graph/life/watch.py's runs_listing, graph/life/stored_outcome.py's RunOutcome), so they are tested without a
browser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eyas.agents.faces.report_html.sections import waiting_text
from eyas.graph.phases.report.next_step import labelled
from eyas.graph.phases.report.outcome import RunOutcome

KEPT_OR_NOT = {"kept": "kept", "rolled_back": "rolled back"}  # what production's own counters decided


def gate_place(view: Mapping[str, Any]) -> str:
    """The gate a run waits at, from its view (graph/gates): 'the data gate', 'the failure gate of train'."""
    phase = view.get("phase") or "an unknown phase"
    return f"the failure gate of {phase}" if view.get("kind") == "failure" else f"the {phase} gate"


def outcome_word(outcome: RunOutcome | None, finished: bool) -> str:
    """kept, rolled back, nothing deployed (it ended without production keeping a drafter) or not finished; empty
    for a chat, which has no outcome."""
    if outcome is None:
        return ""
    said = KEPT_OR_NOT.get(outcome.deploy.status)
    if said is not None:
        return said
    return "nothing deployed" if finished else "not finished"


def production_speedup(outcome: RunOutcome | None) -> str:
    """The speedup production's own counters measured with what the deploy put in ('0.73x'); empty where it was
    never restarted with it (the held-out evaluation's figure is the run page's, not the list's)."""
    production = outcome.deploy.production if outcome is not None else None
    speedup = production.speedup if production is not None else None
    return "" if speedup is None else f"{speedup:.2f}x"


def age_text(seconds: float | None) -> str:
    """'just now', '12 min ago', '3 h ago', '4 d ago'; empty where it is not known."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600:.0f} h ago"
    return f"{seconds // 86400:.0f} d ago"


@dataclass(frozen=True)
class ListedRun:
    """One run of the dashboard's list, in words."""

    run_id: str
    phase: str
    condition: str  # running, waiting at a gate, ended, stopped, or what damages it
    driver: str
    outcome: str  # see outcome_word
    speedup: str  # see production_speedup
    age: str  # since the run last wrote anything
    waiting: str | None  # the gate it waits at (gate_place)
    changed: float | None


def listed_run(row: Mapping[str, Any], driver: str, now: float) -> ListedRun:
    """A row of runs_listing (graph/life/watch.py) in words; `driver` its driver in words (driver_phrase)."""
    outcome = RunOutcome.model_validate(row["outcome"]) if row["outcome"] else None
    finished = row["state"] == "ended" or row["phase"] == "report"
    changed = row["changed"]
    return ListedRun(
        run_id=row["run"],
        phase=row["phase"],
        condition=row["damage"] or row["state"],
        driver=driver,
        outcome=outcome_word(outcome, finished),
        speedup=production_speedup(outcome),
        age=age_text(now - changed if changed is not None else None),
        waiting=gate_place(row["waiting_at"]) if row["waiting_at"] else None,
        changed=changed,
    )


def in_order(runs: Sequence[ListedRun]) -> list[ListedRun]:
    """Runs waiting for an answer first, then the others; each group the most recently active first."""
    return sorted(runs, key=lambda run: (run.waiting is None, -(run.changed or 0.0)))


def lead_lines(outcome: RunOutcome | None, waiting: str | None, condition: str, phase: str | None) -> list[str]:
    """The run page's first lines: where it waits for an answer; else, ended (or recorded), its outcome and next
    steps as `eyas status` says them; else what it is doing now."""
    if waiting is not None:
        return [waiting_text(waiting)]
    if outcome is None:
        return ["a chat session: it has no pipeline outcome"]
    where = f"in phase {phase}" if phase else "before its first phase"
    if condition == "running":
        return [f"running {where}: the outcome comes when it ends"]
    if condition == "stopped":
        return [f"stopped {where}, not finished: `eyas resume` continues it"]
    return [f"outcome: {outcome.headline}", *(f"{label}: {step}" for label, step in labelled(outcome.next_steps))]
