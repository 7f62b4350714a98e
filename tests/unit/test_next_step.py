"""The report's next step comes from what the run measured (graph/phases/report/next_step.py): a faster method is
the one to deploy, a validation curve that still rises asks for more data, a validation loss far above the training
loss says overfitting, and lowering deploy_min_speedup (the one step that makes production slower) comes only when
nothing else applies, named the last resort. Pure functions over measured inputs; then one run's state read through."""

from __future__ import annotations

import json
from typing import Any

from eyas.graph.phases.report.next_step import Measured, Validation, next_steps, run_next_steps
from eyas.graph.phases.report.node import next_step_lines, with_deploy
from eyas.tools.service.deploy import DeployResult, Probe
from eyas.tools.service.winner import Candidate
from eyas.tools.workloads.speculative import drafter_config

DRAFTER = Candidate(method="eagle3", k=3, speedup=0.83, low=0.79, high=0.87)
NGRAM = Candidate(method="ngram", k=3, speedup=1.13, low=1.08, high=1.18)
FLAT = [Validation(loss=5.0, first_accuracy=0.30), Validation(loss=4.99, first_accuracy=0.302)]


def measured(**figures: Any) -> Measured:
    return Measured(**{"run_id": "r1", "drafter": DRAFTER, "samples": 100, "epochs": 3, "min_speedup": 1.0,
                       "validation": FLAT, "train_loss": 4.8, **figures})  # fmt: skip


def test_a_faster_n_gram_is_the_step_and_the_threshold_is_never_offered() -> None:
    (step,) = next_steps(measured(rival=NGRAM))
    assert step.startswith("deploy n-gram speculation at k=3 rather than the drafter: it measured faster (1.13x")
    assert "0.83x [0.79, 0.87]" in step and "deploy_min_speedup" not in step


def test_n_gram_already_in_production_is_kept() -> None:
    (step,) = next_steps(measured(rival=NGRAM, in_production="ngram"))
    assert step.startswith("keep n-gram speculation at k=3 in production: it measured faster than the drafter")


def test_a_method_faster_than_the_drafter_but_not_than_the_target_alone_is_no_step() -> None:
    slow = Candidate(method="ngram", k=3, speedup=0.95, low=0.9, high=1.0)
    (step,) = next_steps(measured(rival=slow))
    assert "n-gram" not in step and step.endswith("which makes production slower.")


def test_a_method_not_measurably_faster_than_the_drafter_is_no_step() -> None:
    drafter = Candidate(method="eagle3", k=3, speedup=1.15, low=1.05, high=1.25)
    close = Candidate(method="ngram", k=3, speedup=1.2, low=1.1, high=1.3)  # its low end under the drafter's 1.15
    assert not any("n-gram" in step for step in next_steps(measured(drafter=drafter, rival=close)))


def test_a_still_rising_curve_asks_for_more_data_with_its_pace() -> None:
    rising = [Validation(loss=5.2, first_accuracy=0.30), Validation(loss=4.9, first_accuracy=0.35)]
    (step,) = next_steps(measured(validation=rising))
    assert step == (
        "train on more data (now 100 samples): the validation curve still rises (accuracy at the first draft "
        "position 0.300 → 0.350 over the last epoch; at that pace, about +0.050 for each epoch's worth of samples "
        "more)."
    )
    by_loss = [Validation(loss=5.0), Validation(loss=4.8)]  # no accuracy logged: the loss fell 4 %
    (step,) = next_steps(measured(validation=by_loss))
    assert "validation loss 5.00 → 4.80 over the last epoch" in step


def test_a_validation_loss_far_above_the_training_loss_is_overfitting() -> None:
    (step,) = next_steps(measured(train_loss=2.4))
    assert step == (
        "the drafter overfits its data: validation loss 4.99 is 2.1x the training loss 2.40; train on more data "
        "(now 100 samples) or for fewer epochs (now 3)."
    )


def test_lowering_the_threshold_comes_only_when_nothing_else_applies_and_is_named_the_last_resort() -> None:
    (step,) = next_steps(measured())
    assert "Last resort" in step and "lowering deploy_min_speedup (now 1x)" in step
    assert all("Last resort" not in step for step in next_steps(measured(rival=NGRAM, train_loss=2.0)))
    assert len(next_steps(measured(rival=NGRAM, train_loss=2.0))) == 2  # n-gram first, then the overfitting


def test_a_drafter_in_production_needs_no_step_and_one_that_pays_unused_is_deployed() -> None:
    assert next_steps(measured(in_production="eagle3")) == []
    fast = Candidate(method="eagle3", k=3, speedup=1.4, low=1.3, high=1.5)
    (step,) = next_steps(measured(drafter=fast, rival=NGRAM))
    assert step.startswith("deploy the drafter: it measured fastest (1.40x") and "`eyas deploy r1`" in step
    assert "eyas deploy" not in " ".join(next_steps(measured(drafter=fast, restarted_with_drafter=True)))


EVALUATION = {
    "k": 3, "mean_acceptance_length": 1.2, "speedup": 0.83, "tokens_per_s_baseline": 16.46,
    "tokens_per_s_speculative": 13.7, "intervals": {"speedup": [0.79, 0.87]},
    "ngram": {"3": {"k": 3, "speedup": 1.13, "mean_acceptance_length": 2.3, "intervals": {"speedup": [1.08, 1.18]}}},
}  # fmt: skip


def rolled_back() -> DeployResult:
    """deploy.json after production's own counters turned the drafter away."""
    return DeployResult(
        kept=False, reason="lost to the target alone", drop_in="/etc/x.conf", drop_in_text="", argv_before=["vllm"],
        argv_deployed=["vllm", "--speculative-config", json.dumps(drafter_config("/d", 3))],
        before=Probe(requests=4, completion_tokens=100, seconds=10.0, tokens_per_s=11.8),
        after=Probe(requests=4, completion_tokens=100, seconds=10.0, tokens_per_s=8.6, mean_acceptance_length=1.2),
    )  # fmt: skip


def test_a_runs_state_and_deploy_read_through_to_its_steps() -> None:
    training = {"train": [{"step": step, "loss": 2.0} for step in range(10)],
                "val": [{"step": 5, "loss": 5.3, "acc": [0.2]}, {"step": 10, "loss": 5.0, "acc": [0.26]}]}  # fmt: skip
    state = {"run_id": "r1", "evaluation": EVALUATION, "training": training, "sizes": {"samples": 400, "epochs": 2}}
    steps = run_next_steps(state, rolled_back(), 1.0)
    assert [step.split(":")[0] for step in steps] == [
        "deploy n-gram speculation at k=3 rather than the drafter", "train on more data (now 400 samples)",
        "the drafter overfits its data",
    ]  # fmt: skip
    assert run_next_steps({"run_id": "r1"}, None, 1.0) == []  # nothing evaluated: nothing measured to go on


def test_a_deploy_by_hand_replaces_the_reports_next_steps_with_its_own() -> None:
    first = "# eyas run x\n\n**Outcome:** trained\n" + "\n".join(next_step_lines(["a.", "b."])) + "\n\n## Gates\n"
    assert "**Outcome:** trained\n\n**Next step:** a.\n\n**Also:** b.\n\n## Gates" in first
    result = rolled_back()
    markdown = with_deploy(with_deploy(first, result, ["c."]), result, ["d."])
    assert "**Outcome:** rolled back: lost to the target alone\n\n**Next step:** d.\n\n## Gates" in markdown, markdown
    assert "a." not in markdown and "b." not in markdown and "c." not in markdown
