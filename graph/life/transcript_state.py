"""A run's state folded from its transcript: what its nodes returned and how its gates were answered. For a run
whose checkpoint DB is gone or was never copied (a recorded example, a run folder fetched from a host), so that its
report, `eyas status` and `eyas runs` still say how it ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eyas.tools.recording.transcript import ApprovalEvent, Event, NodeEvent, RunEvent, TranscriptError
from eyas.tools.recording.transcript_reader import read_transcript


def transcript_state(transcript: Path) -> dict[str, Any]:
    """The state folded from the transcript at `transcript`; empty where there is none or it cannot be read."""
    try:
        return fold_state(list(read_transcript(transcript).events))
    except TranscriptError:
        return {}


def fold_state(events: list[Event]) -> dict[str, Any]:
    """The state the run reached, from what its nodes returned and how its gates were answered: node outputs
    merge in order (decisions add up, as in RunState); a gate approved by the policy, or with its downtime window,
    shows it in its view."""
    state: dict[str, Any] = {}
    decisions: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, RunEvent):
            state.update(run_id=(event.input or {}).get("run_id"), sizes=event.meta.get("sizes"),
                         eyas=event.meta.get("eyas"))  # fmt: skip
        elif isinstance(event, ApprovalEvent) and event.decision:
            decisions.append({"gate": event.gate, "action": event.decision, "reason": event.reason, "who": event.who})
        elif isinstance(event, NodeEvent) and event.phase == "end" and isinstance(event.output, dict):
            output = dict(event.output)
            if output.get("kind") in ("gate", "failure"):
                decisions += _policy_decision(output)
                continue
            decisions += output.pop("decisions", [])
            state.update(output)
    state["decisions"] = decisions
    return {key: value for key, value in state.items() if value is not None}


def _policy_decision(view: dict[str, Any]) -> list[dict[str, Any]]:
    """A gate that passed without asking: approved by the policy, or with its downtime window at an earlier gate."""
    approved = view.get("window_approval")
    if isinstance(approved, dict):
        return [{"gate": view.get("phase"), "action": "approve", "reason": approved.get("reason", ""),
                 "who": approved.get("who", "")}]  # fmt: skip
    policy = view.get("policy")
    if isinstance(policy, dict) and policy.get("approve"):
        return [{"gate": view.get("phase"), "action": "approve", "reason": policy.get("reasons", ""), "who": "policy"}]
    return []
