"""The rule production's own counters hold a deployed method to, written once: the check after the restart
(`KeepRule.judge`) and the sentence the gate and `eyas deploy` state before it (`KeepRule.sentence`) are made of the
same floors, so the words cannot say one rule while the check applies another.

A drafter stays when its mean acceptance length and its speedup (tokens/s with it over tokens/s before: the target
alone) reach their thresholds, and that speedup beats n-gram speculation's evaluated one by the margin; n-gram
speculation stays on its speedup alone (its acceptance, counted only where the context repeats, is no measure of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from eyas.tools.workloads.speculative import DRAFTER_METHOD, NGRAM_METHOD

NGRAM_NOT_MEASURED = "n-gram not measured"


def method_words(method: str) -> str:
    """A deployed method as the rule, its verdicts and the deploy's progress name it."""
    return "n-gram speculation" if method == NGRAM_METHOD else "the drafter"


def _shown(value: float | None, unit: str) -> str:
    return f"{value:.2f}{unit}" if value is not None else "unknown"


@dataclass(frozen=True)
class Floor:
    """A measure of production and the least value it must reach (`unit` follows each number: "x" for a speedup)."""

    measure: str
    least: float
    unit: str = ""

    def met(self, value: float | None) -> bool:
        return value is not None and value >= self.least

    def rule(self) -> str:
        return f"{self.measure} >= {self.least:g}{self.unit}"

    def verdict(self, value: float | None) -> str:
        reached = "reaches" if self.met(value) else "is under"
        return f"{self.measure} {_shown(value, self.unit)} {reached} the threshold {self.least:g}{self.unit}"


@dataclass(frozen=True)
class NgramBar:
    """n-gram speculation's evaluated speedup, which a drafter's must beat by `margin`."""

    evaluated: float
    margin: float

    @property
    def needed(self) -> float:
        return self.evaluated + self.margin

    def met(self, speedup: float | None) -> bool:
        return speedup is not None and speedup >= self.needed

    def rule(self) -> str:
        evaluated = f"n-gram speculation's evaluated {self.evaluated:.2f}x"
        return f">= {self.needed:.2f}x ({evaluated} plus the margin {self.margin:g})"

    def verdict(self, speedup: float | None) -> str:
        verb = "beats" if self.met(speedup) else "does not beat"
        return (
            f"speedup {_shown(speedup, 'x')} {verb} n-gram's {self.evaluated:.2f}x by the margin {self.margin:g} "
            f"(needs {self.needed:.2f}x)"
        )


@dataclass(frozen=True)
class KeepRule:
    """What production's own counters must show for `method` to stay: the deploy's thresholds (Thresholds.keep_rule)
    and n-gram speculation's evaluated speedup at the drafter's k."""

    min_acceptance_length: float
    min_speedup: float
    ngram_margin: float
    ngram_speedup: float | None = None
    method: str = DRAFTER_METHOD

    @property
    def acceptance(self) -> Floor:
        return Floor("mean acceptance length", self.min_acceptance_length)

    @property
    def speedup(self) -> Floor:
        return Floor("speedup", self.min_speedup, "x")

    @property
    def ngram(self) -> NgramBar | None:
        """None where the evaluation did not measure n-gram (an older run, --acceptance-only): it holds nothing back."""
        return None if self.ngram_speedup is None else NgramBar(self.ngram_speedup, self.ngram_margin)

    def sentence(self, ngram_to_come: bool = False) -> str:
        """The rule in words, for the gate's steps and `eyas deploy`. `ngram_to_come`: n-gram is not measured yet,
        but the evaluation will measure it (the dry run of a run that measures n-gram shows the deploy before it)."""
        tokens = f"tokens/s with {method_words(self.method)} over without"
        if self.method == NGRAM_METHOD:
            return (
                f"{self.speedup.rule()} ({tokens}; its acceptance, counted only where the context repeats, is not held "
                "to a threshold)"
            )
        rule = f"{self.acceptance.rule()} and {self.speedup.rule()} ({tokens})"
        if self.ngram is not None:
            return f"{rule} and {self.ngram.rule()}"
        if ngram_to_come:
            return (
                f"{rule} and n-gram speculation's speedup plus the margin {self.ngram_margin:g}, as the evaluation "
                "measures it (evaluate.py --ngram)"
            )
        return f"{rule}; {NGRAM_NOT_MEASURED}"

    def judge(self, before: float | None, after: float, acceptance: float | None) -> tuple[bool, str, float | None]:
        """Keep or roll back, from production's tokens/s before (None: not measured) and after, and its mean
        acceptance length after (None: it exported no speculative-decoding counters): the verdict, its reason (each
        baseline the method lost to and every threshold missed, with the figures) and the speedup."""
        speedup = after / before if before else None
        rate = f"{after:.1f} tokens/s with {method_words(self.method)}, " + (
            f"{before:.1f} without" if before is not None else "not measured without"
        )
        fast, pace = self.speedup.met(speedup), f"{self.speedup.verdict(speedup)} ({rate})"
        if self.method == NGRAM_METHOD:
            return fast, pace if fast else f"lost to the target alone: {pace}", speedup
        if acceptance is None:
            return False, "production exported no speculative-decoding counters: the drafter is not in use", speedup
        accepted = self.acceptance.met(acceptance)
        ngram = self.ngram
        beats = ngram is None or ngram.met(speedup)
        against = ngram.verdict(speedup) if ngram is not None else NGRAM_NOT_MEASURED
        if accepted and fast and beats:
            return True, f"{self.acceptance.verdict(acceptance)}; {pace}; {against}", speedup
        missed = [] if accepted else [self.acceptance.verdict(acceptance)]
        if not fast:  # what to do next comes from what was measured (graph/phases/report/next_step.py), not here
            missed.append(f"lost to the target alone: {pace}")
        if not beats:
            missed.append(f"lost to n-gram speculation: {against} (deploy_ngram_margin in the policy, --ngram-margin)")
        return False, "; ".join(missed), speedup
