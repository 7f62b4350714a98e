"""A stored run's outcome as `eyas status`, `eyas runs` and `eyas report` print it for scripts. One reader, so the
three say the same of a run: its state is its checkpoint's, else (no checkpoint: a recorded run, a run folder
copied from a host) folded from its transcript as its report reads it; deploy.json supersedes the deploy phase; the
next steps are held to the policy the run started with."""

from __future__ import annotations

from eyas.graph.life.run_view import RunView
from eyas.graph.life.transcript_state import transcript_state
from eyas.graph.phases.deploy.record import deploy_record
from eyas.graph.phases.report.outcome import RunOutcome, run_outcome
from eyas.graph.policy import started_policy
from eyas.graph.runs import RunDir


def stored_outcome(run: RunDir, view: RunView) -> RunOutcome | None:
    """The outcome of `run` (`view`, its checkpoint as read_run read it); None for a chat, which has none."""
    meta = run.meta()
    if meta.get("kind") == "chat":
        return None
    state = dict(view.state) if view.started else transcript_state(run.transcript)
    state.setdefault("run_id", run.run_id)
    return run_outcome(state, deploy_record(run), started_policy(meta).deploy_min_speedup)
