"""Which way of serving production is fastest: the target alone, vLLM's n-gram speculation at some k, or the trained
drafter at some k, from their speedups over the target alone measured side by side on the same prompts.

The rule, in full:
- A candidate beats the target alone when the low end of its speedup's interval (its point estimate where no
  interval was measured) reaches `min_speedup` (by default 1: a speedup whose interval reaches below the target
  alone's pace may be noise; an operator lowers it to accept a slower method on purpose). Only those are eligible;
  where none is, the target alone wins and production is left as it is.
- The leader is the eligible candidate with the highest speedup. A simpler eligible candidate whose point estimate
  the leader's low end does not clear (plus `drafter_margin` where a drafter leads n-gram: its upkeep) takes the lead,
  and the same question is asked of the new leader, until nothing simpler is left in reach. So ties and overlapping
  intervals go to the simpler method: the target alone, then n-gram, then the drafter; at one method, the smaller k
  (fewer tokens drafted per step for the same pace).
Pure functions: no server, no file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

Method = Literal["target", "ngram", "eagle3"]
SIMPLEST_FIRST: tuple[Method, ...] = ("target", "ngram", "eagle3")
METHOD_NAMES = {"target": "the target alone", "ngram": "n-gram", "eagle3": "drafter"}


class Candidate(BaseModel):
    """One way of serving, as measured: its speedup over the target alone (the target alone's is 1) and interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Method
    k: int | None = None  # speculative tokens per step; None for the target alone
    speedup: float
    low: float | None = None  # the interval's bounds, where measured
    high: float | None = None
    tokens_per_s: float | None = None
    mean_acceptance_length: float | None = None

    @property
    def name(self) -> str:
        return METHOD_NAMES[self.method] + ("" if self.k is None else f" k={self.k}")

    @property
    def floor(self) -> float:
        """The least speedup the measurement vouches for: the interval's low end, else the point estimate."""
        return self.low if self.low is not None else self.speedup

    @property
    def simplicity(self) -> tuple[int, int]:
        """Lower is simpler: the method, then k."""
        return SIMPLEST_FIRST.index(self.method), self.k or 0

    def figures(self) -> str:
        """Its speedup with the interval, in words."""
        shown = f"{self.speedup:.2f}x"
        if self.low is not None and self.high is not None:
            shown += f" [{self.low:.2f}, {self.high:.2f}]"
        return shown


TARGET_ALONE = Candidate(method="target", speedup=1.0)


class Choice(BaseModel):
    """The winner (the target alone when nothing pays), the one that came closest when nothing did, and why."""

    model_config = ConfigDict(frozen=True)

    winner: Candidate
    closest: Candidate | None = None
    reason: str
    candidates: list[Candidate]

    @property
    def pays(self) -> bool:
        return self.winner.method != "target"


def clears(leader: Candidate, simpler: Candidate, drafter_margin: float) -> bool:
    """Whether `leader` is measurably faster than the simpler `simpler`: its interval's low end above the other's
    point estimate (by the drafter's margin where a drafter is weighed against n-gram)."""
    margin = drafter_margin if (leader.method, simpler.method) == ("eagle3", "ngram") else 0.0
    return leader.floor > simpler.speedup + margin


def _best(candidates: Sequence[Candidate]) -> Candidate:
    """The highest speedup; at the same speedup, the simpler."""
    return max(candidates, key=lambda c: (c.speedup, [-part for part in c.simplicity]))


def choose(candidates: Sequence[Candidate], min_speedup: float, drafter_margin: float) -> Choice:
    """The rule in this module's docstring, over `candidates` (the target alone is added where missing)."""
    given = [c for c in candidates if c.method == "target"]
    pool = [given[0] if given else TARGET_ALONE, *(c for c in candidates if c.method != "target")]
    eligible = [c for c in pool if c.method != "target" and c.floor >= min_speedup]
    if not eligible:
        return nothing_pays(pool, min_speedup)
    leader = _best(eligible)
    overtaken: list[str] = []
    while in_reach := [
        c for c in eligible if c.simplicity < leader.simplicity and not clears(leader, c, drafter_margin)
    ]:
        simpler = _best(in_reach)
        overtaken.append(f"{leader.name} ({leader.figures()}) is not measurably faster than the simpler {simpler.name} "
                         f"({simpler.figures()})")  # fmt: skip
        leader = simpler
    reason = f"{leader.name} is fastest: {leader.figures()} the target alone's tokens/s"
    return Choice(winner=leader, reason="; ".join([reason, *overtaken]), candidates=pool)


def nothing_pays(pool: list[Candidate], min_speedup: float) -> Choice:
    """The target alone (`pool[0]`) wins: which candidate came closest (highest speedup), and why it does not pay."""
    others = [c for c in pool if c.method != "target"]
    if not others:
        return Choice(winner=pool[0], reason="no speculative method was measured", candidates=pool)
    closest = _best(others)
    why = f"nothing beats the target alone: the closest, {closest.name} at {closest.figures()}, "
    if closest.speedup < min_speedup:
        why += f"is under the threshold {min_speedup:g}x"
    else:
        why += (
            f"reaches the threshold {min_speedup:g}x only by chance: its interval reaches down to {closest.floor:.2f}x"
        )
    return Choice(winner=pool[0], closest=closest, reason=why, candidates=pool)
