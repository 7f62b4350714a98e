"""The report's first line: what happened to the run, in words a reader acts on (deployed, rolled back and why,
stopped at which gate, failed where), never "finished" for a drafter production turned away."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eyas.graph.phases.evaluate.record import run_evaluation
from eyas.graph.run_facts import run_facts
from eyas.graph.state import DeployOutcome
from eyas.tools.service.deploy_result import DeployResult, deployed_method
from eyas.tools.workloads.speculative import NGRAM_METHOD

_REJECTED = re.compile(r"rejected at the (\S+) gate: (.*)", re.DOTALL)
_BLOCKED = re.compile(r"the (\S+) phase was approved but cannot run")


def headline(state: Mapping[str, Any], deployed: DeployResult | None = None) -> str:
    """The run's outcome from its state and, when there is one, deploy.json (`deployed`): what `eyas deploy` or
    `eyas rollback` did last supersedes the deploy phase's own outcome."""
    run = run_facts(state)
    failure = run.failure
    if failure:
        where = failure["phase"] or "a job"
        return f"failed in {where}: job {failure['job_id']} {failure['status']}: {failure['diagnosis']}"
    if deployed is not None and deployed.acted:
        if deployed.kept:
            return f"deployed ({_kept_method(deployed.argv_deployed)} kept: {deployed.reason})"
        return f"rolled back: {deployed.reason}"
    outcome = run.deploy
    if outcome is not None:
        # Kept or rolled back, production's own figures say it; otherwise the held-out evaluation's do.
        measured = "" if outcome.status in ("kept", "rolled_back", "failed") else _measured(state)
        return _deploy_outcome(outcome) + measured
    if run.stopped:
        return _stopped(run.stopped) + _measured(state)
    last = run.decisions[-1] if run.decisions else None
    if last is not None and last["action"] == "reject":  # a state folded from a transcript has only these
        return _stopped(f"rejected at the {last['gate']} gate: {last['reason'] or 'no reason given'}") + _measured(
            state
        )
    if run.evaluation:
        return "trained and measured, not deployed" + _measured(state)
    if run.phase == "report":
        return "ended with no evaluation, no stop and no failure on record"
    return f"not finished (last phase: {run.phase or 'none'})"


def _deploy_outcome(outcome: DeployOutcome) -> str:
    status, reason = outcome.status, outcome.reason
    if status == "kept":
        return f"deployed ({_kept_method(outcome.argv_after)} kept: {reason})"
    if status == "rolled_back":
        return f"rolled back: {reason}"
    if status == "rejected":
        return _stopped(reason)
    if status == "failed":
        return f"failed in deploy: {reason}"
    return f"not deployed: {reason}"


def _kept_method(argv: list[str] | None) -> str:
    """What production kept, by the --speculative-config in its argv: n-gram speculation, else the drafter."""
    return "n-gram speculation" if deployed_method(argv or []) == NGRAM_METHOD else "drafter"


def _stopped(stopped: str) -> str:
    rejected = _REJECTED.match(stopped)
    if rejected:
        return f"stopped at the {rejected.group(1)} gate: rejected: {rejected.group(2)}"
    blocked = _BLOCKED.match(stopped)
    if blocked:
        return f"stopped at the {blocked.group(1)} gate: {stopped}"
    return f"stopped: {stopped}"


def _measured(state: Mapping[str, Any]) -> str:
    """What the drafter measured on held-out prompts, when it was measured, as the headline's second half."""
    evaluation = run_evaluation(state)
    if evaluation is None:
        return ""
    figures = []
    if evaluation.mean_acceptance_length is not None:
        figures.append(f"mean acceptance length {evaluation.mean_acceptance_length:.2f} at k={evaluation.k}")
    if evaluation.speedup is not None:
        figures.append(f"speedup {evaluation.speedup:.2f}x")
    return f". The drafter measured {', '.join(figures)} on held-out prompts" if figures else ""
