"""What to do after a run whose drafter is not in production, from what the run measured: deploy the method that
measured faster, train on more data while the validation curve still rises, fight overfitting where validation loss
is far above training loss. Lowering deploy_min_speedup, the one step that makes production slower, comes only when
nothing measured points anywhere else, and is named the last resort.

`next_steps` is the rule over the measured inputs alone (no state, no file), so every case has a unit test;
`run_next_steps` reads those inputs from a run's state and deploy.json."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from eyas.graph.phases.deploy.tournament import candidates_at_one
from eyas.graph.phases.evaluate.record import run_evaluation
from eyas.graph.phases.report.deploy_facts import deploy_facts
from eyas.graph.run_facts import run_facts
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.winner import Candidate, clears
from eyas.tools.settings.units import figure
from eyas.tools.workloads.speculative import DRAFTER_METHOD, NGRAM_METHOD

# The validation curve still rises when its last epoch raised first-position accuracy by a point or more, or cut the
# validation loss by 2 % or more: less is what the noise of a few hundred held-out tokens moves it.
RISING_ACCURACY = 0.01
RISING_LOSS = 0.02
# Validation loss this many times the training loss: the drafter learned its samples rather than the target.
OVERFIT_RATIO = 1.5
TRAIN_WINDOW = 5  # training rows averaged for the training loss: one step's loss is noisy


class Validation(BaseModel):
    """One validation of the training (once per epoch): its loss and the accuracy at the first draft position."""

    model_config = ConfigDict(frozen=True)

    loss: float | None = None
    first_accuracy: float | None = None


class Measured(BaseModel):
    """What the next step is decided from, all of it measured by the run."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    drafter: Candidate | None = Field(None, description="the drafter's fastest k in the evaluation")
    rival: Candidate | None = Field(None, description="the fastest other speculative method the evaluation measured")
    in_production: str | None = Field(None, description="the method this run left in production: eagle3 or ngram")
    restarted_with_drafter: bool = Field(False, description="production ran the drafter once (kept or rolled back)")
    validation: list[Validation] = Field(default_factory=list)
    train_loss: float | None = None
    samples: int
    epochs: int
    min_speedup: float = Field(description="the policy's deploy_min_speedup")


def next_steps(measured: Measured) -> list[str]:
    """The steps in the order to take them; none when the drafter runs in production."""
    if measured.in_production == DRAFTER_METHOD:
        return []
    rules = (_faster_method, _deploy_drafter, _still_rising, _overfits)
    return [step for rule in rules if (step := rule(measured))] or [_last_resort(measured)]


def _faster_method(measured: Measured) -> str | None:
    """Another method measurably faster than the drafter, and than the target alone by the policy's threshold."""
    rival, drafter = measured.rival, measured.drafter
    if rival is None or rival.floor < measured.min_speedup:
        return None
    if drafter is not None and not clears(rival, drafter, 0.0):
        return None
    against = f"{rival.figures()} the target alone's tokens/s, the drafter {drafter.figures() if drafter else 'n/a'}"
    if measured.in_production == rival.method:
        return f"keep {_words(rival)} in production: it measured faster than the drafter ({against})."
    return (
        f"deploy {_words(rival)} rather than the drafter: it measured faster ({against}, on the same held-out "
        "prompts) and needs no drafter to serve."
    )


def _deploy_drafter(measured: Measured) -> str | None:
    """A drafter that measured fastest, beyond the threshold, that production never ran."""
    drafter, rival = measured.drafter, measured.rival
    if drafter is None or measured.restarted_with_drafter or measured.in_production is not None:
        return None
    if drafter.floor < measured.min_speedup or (rival is not None and not clears(drafter, rival, 0.0)):
        return None
    return (
        f"deploy the drafter: it measured fastest ({drafter.figures()} the target alone's tokens/s); "
        f"`eyas deploy {measured.run_id}` puts it into production and keeps it only if production's own counters agree."
    )


def _still_rising(measured: Measured) -> str | None:
    """The last epoch still improved the validation: more data buys more, at about that pace."""
    if len(measured.validation) < 2:
        return None
    before, last = measured.validation[-2], measured.validation[-1]
    if before.first_accuracy is not None and last.first_accuracy is not None:
        gain = last.first_accuracy - before.first_accuracy
        if gain >= RISING_ACCURACY:
            return _more_data(measured, (
                f"accuracy at the first draft position {figure(before.first_accuracy)} → "
                f"{figure(last.first_accuracy)} over the last epoch; at that pace, about {gain:+.3f} for each epoch's "
                "worth of samples more"
            ))  # fmt: skip
    if before.loss and last.loss is not None and (before.loss - last.loss) / before.loss >= RISING_LOSS:
        return _more_data(measured, f"validation loss {figure(before.loss)} → {figure(last.loss)} over the last epoch")
    return None


def _more_data(measured: Measured, curve: str) -> str:
    return f"train on more data (now {measured.samples:,} samples): the validation curve still rises ({curve})."


def _overfits(measured: Measured) -> str | None:
    last = measured.validation[-1] if measured.validation else None
    if last is None or last.loss is None or not measured.train_loss or measured.train_loss <= 0:
        return None
    ratio = last.loss / measured.train_loss
    if ratio < OVERFIT_RATIO:
        return None
    return (
        f"the drafter overfits its data: validation loss {figure(last.loss)} is {ratio:.1f}x the training loss "
        f"{figure(measured.train_loss)}; train on more data (now {measured.samples:,} samples) or for fewer epochs "
        f"(now {measured.epochs})."
    )


def _last_resort(measured: Measured) -> str:
    return (
        "nothing measured points to a faster drafter or method. Last resort, and only where speed is not the aim: "
        f"lowering deploy_min_speedup (now {measured.min_speedup:g}x) keeps a drafter slower than the target alone, "
        "which makes production slower."
    )


def _words(candidate: Candidate) -> str:
    return "n-gram speculation" + (f" at k={candidate.k}" if candidate.k is not None else "")


def labelled(steps: list[str]) -> list[tuple[str, str]]:
    """The steps as every face says them: the first is the next step, the others follow it ("also")."""
    return [("also" if index else "next step", step) for index, step in enumerate(steps)]


def run_next_steps(state: Mapping[str, Any], deployed: DeployResult | None, min_speedup: float) -> list[str]:
    """The next steps of a run from its state and deploy.json; none before its evaluation."""
    measured = run_measured(state, deployed, min_speedup)
    return next_steps(measured) if measured is not None else []


def run_measured(state: Mapping[str, Any], deployed: DeployResult | None, min_speedup: float) -> Measured | None:
    """What `next_steps` weighs, from the run's evaluation, its deploy and its training curves."""
    evaluation = run_evaluation(state)
    if evaluation is None:
        return None
    candidates = candidates_at_one(evaluation)
    facts = deploy_facts(state, deployed)
    run = run_facts(state)
    curves = run.training or {}
    losses = [float(row["loss"]) for row in (curves.get("train") or [])[-TRAIN_WINDOW:] if row.get("loss") is not None]
    sizes = run.sizes
    return Measured(
        run_id=run.run_id or "RUN",
        drafter=_fastest(candidates, DRAFTER_METHOD),
        rival=_fastest(candidates, NGRAM_METHOD),
        in_production=facts.method if facts.status == "kept" else None,
        restarted_with_drafter=facts.status in ("kept", "rolled_back") and facts.method != NGRAM_METHOD,
        validation=[_validation(row) for row in curves.get("val") or []],
        train_loss=statistics.fmean(losses) if losses else None,
        samples=sizes.samples,
        epochs=sizes.epochs,
        min_speedup=min_speedup,
    )


def _fastest(candidates: list[Candidate], method: str) -> Candidate | None:
    found = [candidate for candidate in candidates if candidate.method == method]
    return max(found, key=lambda candidate: candidate.speedup) if found else None


def _validation(row: Mapping[str, Any]) -> Validation:
    accuracy = row.get("acc") or []
    return Validation(loss=row.get("loss"), first_accuracy=accuracy[0] if accuracy else None)
