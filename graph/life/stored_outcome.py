"""A stored run's outcome as `eyas status`, `eyas runs`, `eyas report` and the dashboard show it. One reader, so they
all say the same of a run: its state is its checkpoint's, else (no checkpoint: a recorded run, a run folder copied
from a host) folded from its transcript as its report reads it; deploy.json supersedes the deploy phase; the next
steps are held to the policy the run started with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eyas.graph.life.run_view import RunView
from eyas.graph.life.transcript_state import transcript_state
from eyas.graph.phases.deploy.record import deploy_record
from eyas.graph.phases.report.outcome import RunOutcome, run_outcome
from eyas.graph.policy import started_policy
from eyas.graph.runs import RunDir


def known_state(run: RunDir, view: RunView) -> dict[str, Any]:
    """What is known of `run`'s state: its checkpoint's (`view`, as read_run read it), else its transcript's."""
    state = dict(view.state) if view.started else transcript_state(run.transcript)
    state.setdefault("run_id", run.run_id)
    return state


def stored_outcome(run: RunDir, state: Mapping[str, Any]) -> RunOutcome | None:
    """The outcome of `run` from its known_state `state`; None for a chat, which has none."""
    meta = run.meta()
    if meta.get("kind") == "chat":
        return None
    return run_outcome(state, deploy_record(run), started_policy(meta).deploy_min_speedup)
