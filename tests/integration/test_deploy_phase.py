"""The deploy phase where no production can be changed: a policy that skips it ends the run at its report as before
the phase existed, and a deploy approved for a service eyas cannot control fails before touching anything. The
real graph and checkpoint DB in this process; the target is the embedded one at a port where nothing listens (its
unit file never made), so any attempt to reach production would fail the test."""

from __future__ import annotations

import json
from pathlib import Path

from eyas.graph.life.runner import Outcome
from eyas.graph.policy import Policy
from eyas.graph.state import GateAnswer
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from gated_runs import stored_run

EVALUATION = {"k": 3, "mean_acceptance_length": 1.4, "speedup": 1.1, "prompts": 16}


def evaluated_run(
    tmp_path: Path, policy: Policy, answer: GateAnswer | None = None, evaluation: dict = EVALUATION
) -> tuple[Outcome, list[dict]]:
    """A run whose evaluation just ended (evaluation.json on the host), driven on from there."""
    target = EmbeddedTarget(tmp_path / "cache", port=9)
    remote = target.workdir / "runs" / "evaluated"
    remote.mkdir(parents=True)
    (remote / "evaluation.json").write_text(json.dumps(evaluation))
    values = {"run_id": "evaluated", "sizes": DEMO.model_dump(), "decisions": [], "plan": {"verdict": "fits"},
              "jobs": {"evaluate": ["evaluated.evaluate"]},
              "artifacts": {"drafter": str(remote / "drafter")}}  # fmt: skip
    seen: list[dict] = []

    def ask(view: dict, elsewhere: object) -> GateAnswer:
        seen.append(view)
        assert answer is not None, view
        return answer

    _, outcome = stored_run(target, tmp_path / "runs", values, after="monitor_evaluate", policy=policy, ask=ask)
    return outcome, seen


def test_a_policy_that_skips_the_deploy_ends_the_run_with_its_evaluation(tmp_path: Path) -> None:
    outcome, seen = evaluated_run(tmp_path, Policy(deploy="skip"))
    assert outcome.finished and not seen
    state = outcome.state
    assert state["evaluation"]["mean_acceptance_length"] == 1.4 and "stopped" not in state
    assert state["deploy"]["status"] == "skipped" and 'deploy = "skip"' in state["deploy"]["reason"]
    assert '**Outcome:** not deployed: the policy\'s deploy = "skip"' in state["report"]
    assert "The drafter measured mean acceptance length 1.40 at k=3, speedup 1.10x" in state["report"]
    assert "**Drafter not deployed (skipped):**" in state["report"]
    # An evaluation without n-gram figures (from before they were measured, or --no-eval-ngram) says so.
    assert "| n-gram | n-gram not measured | n/a | n/a |" in state["report"]


def test_an_approved_deploy_to_a_service_eyas_cannot_read_fails_before_touching_it(tmp_path: Path) -> None:
    policy = Policy(deploy="auto")  # the evaluation reaches the thresholds, but the service cannot be read
    outcome, seen = evaluated_run(tmp_path, policy, GateAnswer(action="approve", reason="try it"))
    (view,) = seen
    assert view["choices"] == ["approve", "reject"] and view["deploy"]["error"].startswith("the deploy cannot be made")
    assert not view["policy"]["approve"] and view["policy"]["reasons"].startswith("the deploy cannot be made")
    assert view["estimate"]["evaluation mean acceptance length"] == "1.400"
    assert view["estimate"]["evaluation n-gram"] == "n-gram not measured"
    assert "evaluation: drafter k=3 is fastest: 1.10x the target alone's tokens/s" in view["policy"]["reasons"]
    assert view["deploy"]["winner"] == "drafter k=3" and view["deploy"]["candidates"]["drafter k=3"].startswith(
        "concurrency 1: 1.10x"
    )
    # Shown at the gate, in the terminal and the dashboard alike: the winner, then every candidate's figures.
    assert view["estimate"]["evaluation winner"].startswith("drafter k=3: drafter k=3 is fastest: 1.10x")
    assert view["estimate"]["candidate the target alone"] == "concurrency 1: 1.00x"
    deploy = outcome.state["deploy"]
    assert outcome.finished and deploy["status"] == "failed" and "production untouched" in deploy["reason"]
    assert not (tmp_path / "runs" / "evaluated" / "production-stopped.json").exists()
    assert "**Drafter not deployed (failed):**" in outcome.state["report"]
    assert "**Outcome:** failed in deploy: not deployed, production untouched" in outcome.state["report"]


def test_where_nothing_beats_the_target_alone_no_gate_is_asked_and_the_report_names_the_closest(
    tmp_path: Path,
) -> None:
    """The demo's figures: the drafter at 0.75x, n-gram at 1.02x with an interval reaching under 1. Production (where
    nothing listens here) is never reached: the run ends at its report, saying which came closest and why."""
    lost = {**EVALUATION, "speedup": 0.75, "intervals": {"speedup": [0.7, 0.8]},
            "ngram": {"3": {"k": 3, "speedup": 1.02, "intervals": {"speedup": [0.98, 1.06]}}}}  # fmt: skip
    outcome, seen = evaluated_run(tmp_path, Policy(deploy="auto"), evaluation=lost)
    assert outcome.finished and not seen
    deploy = outcome.state["deploy"]
    assert deploy["status"] == "skipped" and deploy["argv_after"] == []
    assert deploy["reason"] == (
        "nothing beats the target alone: the closest, n-gram k=3 at 1.02x [0.98, 1.06], reaches the threshold 1x only "
        "by chance: its interval reaches down to 0.98x; production untouched"
    )
    assert "**Drafter not deployed (skipped):** nothing beats the target alone" in outcome.state["report"]
