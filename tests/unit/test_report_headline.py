"""The report's first line says what happened to the run: deployed with the figures that kept the drafter, rolled back
with the figures that turned it away, stopped at which gate and why, failed in which phase; never "finished" for a
drafter that production rolled back. Built from state dicts as the pipeline leaves them."""

from __future__ import annotations

from typing import Any

import pytest

from eyas.graph.phases.report.headline import headline
from eyas.tools.service.deploy_result import NOT_DEPLOYED_YET, DeployResult

EVALUATION = {"k": 3, "mean_acceptance_length": 1.034, "speedup": 0.821}
ROLLED_BACK = (
    "mean acceptance length 1.03 is under the threshold 1.2; speedup 0.73x is under the threshold 1x "
    "(8.6 tokens/s with the drafter, 11.8 without)"
)


def deploy_outcome(status: str, reason: str) -> dict[str, Any]:
    return {"status": status, "reason": reason, "drafter": "/w/drafter", "argv_before": [], "argv_after": []}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"evaluation": EVALUATION, "deploy": deploy_outcome("kept", "mean acceptance length 2.10 reaches 1.2")},
         "deployed (drafter kept: mean acceptance length 2.10 reaches 1.2)"),
        ({"evaluation": EVALUATION, "deploy": deploy_outcome("rolled_back", ROLLED_BACK)},
         f"rolled back: {ROLLED_BACK}"),
        ({"evaluation": EVALUATION,
          "deploy": deploy_outcome("rejected", "rejected at the deploy gate: too slow; production untouched")},
         "stopped at the deploy gate: rejected: too slow; production untouched. The drafter measured mean "
         "acceptance length 1.03 at k=3, speedup 0.82x on held-out prompts"),
        ({"evaluation": EVALUATION, "deploy": deploy_outcome("skipped", 'the policy\'s deploy = "skip"')},
         'not deployed: the policy\'s deploy = "skip". The drafter measured mean acceptance length 1.03 at k=3, '
         "speedup 0.82x on held-out prompts"),
        ({"evaluation": EVALUATION, "deploy": deploy_outcome("failed", "the deploy failed and was rolled back: x")},
         "failed in deploy: the deploy failed and was rolled back: x"),
        ({"stopped": "rejected at the extract gate: 5.9 TB does not fit"},
         "stopped at the extract gate: rejected: 5.9 TB does not fit"),
        ({"stopped": "the train phase was approved but cannot run on this host, so nothing was launched: no CUDA"},
         "stopped at the train gate: the train phase was approved but cannot run on this host, so nothing was "
         "launched: no CUDA"),
        ({"stopped": "aborted after r.train exited 1",
          "failure": {"phase": "train", "job_id": "r.train", "status": "exited 1", "diagnosis": "CUDA out of memory"}},
         "failed in train: job r.train exited 1: CUDA out of memory"),
        # A state folded from a transcript holds the gate's answer but not the gate's own update.
        ({"evaluation": EVALUATION, "decisions": [{"gate": "deploy", "action": "reject", "reason": "", "who": "cli"}]},
         "stopped at the deploy gate: rejected: no reason given. The drafter measured mean acceptance length 1.03 "
         "at k=3, speedup 0.82x on held-out prompts"),
        ({"evaluation": {"k": 2, "mean_acceptance_length": 1.5}},
         "trained and measured, not deployed. The drafter measured mean acceptance length 1.50 at k=2 on "
         "held-out prompts"),
        ({"phase": "extract"}, "not finished (last phase: extract)"),
    ],
)  # fmt: skip
def test_the_headline_says_what_happened(state: dict[str, Any], expected: str) -> None:
    assert headline(state) == expected


def test_a_later_deploy_or_rollback_supersedes_the_deploy_phase() -> None:
    state = {"evaluation": EVALUATION, "deploy": deploy_outcome("rejected", "rejected at the deploy gate: later")}
    drafter = ["vllm", "--speculative-config", '{"method":"eagle3"}']
    kept = deployed(True, "mean acceptance length 2.10 reaches the threshold 1.2", drafter)
    assert headline(state, kept) == f"deployed (drafter kept: {kept.reason})"
    ngram = deployed(True, "fast", ["vllm", "--speculative-config", '{"method":"ngram"}'])
    assert headline(state, ngram) == "deployed (n-gram speculation kept: fast)"
    assert headline(state, deployed(False, "rolled back by hand", drafter)) == "rolled back: rolled back by hand"
    # deploy.json before production restarted says nothing yet: the phase's outcome stands.
    assert headline(state, deployed(False, NOT_DEPLOYED_YET, drafter)).startswith("stopped at the deploy gate")


def deployed(kept: bool, reason: str, argv: list[str]) -> DeployResult:
    return DeployResult(kept=kept, reason=reason, drop_in="/d.conf", drop_in_text="", argv_before=["vllm"],
                        argv_deployed=argv)  # fmt: skip
