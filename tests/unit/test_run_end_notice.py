"""The one line a run's end sends through the policy's notify command (a real /bin/sh runs it) says what happened,
in the report's own headline words: deployed, rolled back and why, stopped at which gate, failed where; never
"finished" for a drafter production turned away."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deploy_results import rolled_back
from eyas.graph.life.runner import Outcome, notify
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir

EVALUATION = {"k": 3, "mean_acceptance_length": 2.5, "speedup": 1.75}


@dataclass
class NotifyContext:
    """The two fields of a RunContext that notify reads, and the notes it hears."""

    run: RunDir
    policy: Policy
    notes: list[str] = field(default_factory=list)

    def on_note(self, message: str) -> None:
        self.notes.append(message)


def deploy_phase(status: str, reason: str) -> dict[str, object]:
    return {"status": status, "reason": reason, "drafter": "/w/drafter", "argv_before": [], "argv_after": []}


def notified(tmp_path: Path, outcome: Outcome) -> tuple[str, str]:
    """The message the notify command read on stdin, and the environment it saw."""
    seen = tmp_path / "seen"
    command = f'{{ cat; echo; echo "$EYAS_RUN|$EYAS_REPORT|${{EYAS_GATE:-}}"; }} > {seen}'
    ctx = NotifyContext(RunDir(tmp_path / "r1"), Policy(notify_command=command))
    report = tmp_path / "r1" / "report.html"
    notify(ctx, outcome, report)  # type: ignore[arg-type]
    message, env = seen.read_text().splitlines()
    assert message.endswith(str(report)) and ctx.notes == [message]
    assert env == f"r1|{report}|{outcome.gate_id or ''}"
    return message, env


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"evaluation": EVALUATION, "deploy": deploy_phase("rolled_back", "speedup 0.73x is under the threshold 1x")},
         "eyas run r1: rolled back: speedup 0.73x is under the threshold 1x."),
        ({"evaluation": EVALUATION, "deploy": deploy_phase("kept", "mean acceptance length 2.10 reaches 1.2")},
         "eyas run r1: deployed (drafter kept: mean acceptance length 2.10 reaches 1.2)."),
        ({"evaluation": EVALUATION},
         "eyas run r1: trained and measured, not deployed. The drafter measured mean acceptance length 2.50 at k=3, "
         "speedup 1.75x on held-out prompts."),
        ({"failure": {"phase": "train", "job_id": "r.train", "status": "failed (exit 1)", "diagnosis": "OOM."}},
         "eyas run r1: failed in train: job r.train failed (exit 1): OOM."),
        ({"stopped": "rejected at the train gate: too long"},
         "eyas run r1: stopped at the train gate: rejected: too long."),
    ],
)  # fmt: skip
def test_a_finished_run_is_told_as_its_report_heads_it(tmp_path: Path, state: dict[str, object], expected: str) -> None:
    message, _ = notified(tmp_path, Outcome(True, state))
    assert message.startswith(expected + " Report:")
    assert "finished" not in message.split(" Report:")[0]


def test_a_later_rollback_supersedes_the_deploy_phase(tmp_path: Path) -> None:
    """deploy.json (what `eyas rollback` or the demo's deploy left) wins over the phase's own outcome."""
    (tmp_path / "r1").mkdir()
    result = rolled_back(tmp_path / "r1")
    state = {"evaluation": EVALUATION, "deploy": deploy_phase("kept", "mean acceptance length 2.10 reaches 1.2")}
    message, _ = notified(tmp_path, Outcome(True, state))
    assert message.startswith(f"eyas run r1: rolled back: {result.reason}. Report:")


def test_a_run_waiting_at_a_gate_says_which_and_how_to_answer(tmp_path: Path) -> None:
    message, env = notified(tmp_path, Outcome(False, {}, gate_id="g1", gate={"kind": "gate", "phase": "extract"}))
    assert "stopped at the extract gate: waiting for approval" in message and "eyas approve r1" in message
    assert env.endswith("|g1")
