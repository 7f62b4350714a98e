"""The evaluation as a tournament: every candidate evaluate.py measured (the target alone, n-gram and the drafter at
each k), the winner at concurrency 1 (the evaluation, with intervals) and at the run's concurrency (vLLM's bench,
where it ran there), and which of the two decides where they disagree (the policy's deploy_concurrency). The rule
itself is tools/service/winner.py's."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from eyas.graph.phases.evaluate.record import Evaluation
from eyas.tools.service.k_schedule import SCHEDULE_KEY, KSchedule, k_schedule
from eyas.tools.service.winner import Candidate, Choice, Method, choose
from eyas.tools.workloads.speculative import drafter_config, ngram_config

DecidingConcurrency = Literal["one", "run"]
SERVER_PREFIX: dict[Method, str] = {"eagle3": "speculative-k", "ngram": "ngram-k"}  # evaluate.py's server names


class Tournament(BaseModel):
    """Both choices, and the one that decides."""

    model_config = ConfigDict(frozen=True)

    at_one: Choice
    at_run: Choice | None = None  # None where the bench did not run at the run's concurrency
    run_concurrency: int
    decided_by: DecidingConcurrency

    @property
    def choice(self) -> Choice:
        return self.at_run if self.decided_by == "run" and self.at_run is not None else self.at_one

    def disagreement(self) -> str | None:
        """Where the two concurrencies name different winners, which decides, in words; None where they agree."""
        if self.at_run is None or self.at_run.winner == self.at_one.winner:
            return None
        deciding = "1" if self.decided_by == "one" else str(self.run_concurrency)
        return (
            f"at concurrency 1 {self.at_one.winner.name} wins, at concurrency {self.run_concurrency} "
            f"{self.at_run.winner.name}; the policy's deploy_concurrency = {self.decided_by!r} decides: concurrency "
            f"{deciding}"
        )

    def k_schedule(self) -> KSchedule | None:
        """Where one method wins at both concurrencies at different k: the k per batch size production could draft
        (tools/service/k_schedule.py); None where the winners differ in method, agree on k, or only one was measured."""
        one, run = self.at_one.winner, self.at_run.winner if self.at_run is not None else None
        if run is None or one.method != run.method or one.k is None or run.k is None:
            return None
        return k_schedule(one.k, run.k, self.run_concurrency)

    def k_per_batch_size(self, applied: bool) -> str | None:
        """Where the best k differs between concurrency 1 and the run's: the k per batch size production drafts
        (`applied`), or, where the host's vLLM cannot vary k, the recommendation and the one k production runs."""
        schedule = self.k_schedule()
        if schedule is None:
            return None
        if applied:
            return schedule.text()
        return (
            f"recommended: {schedule.text()}; not applied, as the host's vLLM cannot vary k with the batch size "
            f"({SCHEDULE_KEY}, in vLLM 0.32): production drafts k={self.choice.winner.k}, the deciding "
            "concurrency's best"
        )

    def rows(self) -> dict[str, str]:
        """Every candidate's figures at both concurrencies, by name, as the gate shows them beside the winner."""
        at_run = {c.name: c for c in self.at_run.candidates} if self.at_run else {}
        shown: dict[str, str] = {}
        for candidate in self.at_one.candidates:
            text = f"concurrency 1: {candidate.figures()}"
            if candidate.tokens_per_s is not None:
                text += f" ({candidate.tokens_per_s:.1f} tokens/s)"
            if candidate.mean_acceptance_length is not None:
                text += f", acceptance length {candidate.mean_acceptance_length:.2f}"
            other = at_run.get(candidate.name)
            if other is not None and candidate.method != "target":
                text += f"; concurrency {self.run_concurrency}: {other.figures()}"
            shown[candidate.name] = text
        return shown


def candidates_at_one(evaluation: Evaluation) -> list[Candidate]:
    """The target alone, and every speculative candidate the evaluation measured a speedup for, with its interval."""
    found = [Candidate(method="target", speedup=1.0, tokens_per_s=evaluation.tokens_per_s_baseline)]
    measured: list[tuple[Method, dict[str, Evaluation]]] = [
        ("ngram", evaluation.ngram or {}), ("eagle3", evaluation.results_by_k())
    ]  # fmt: skip
    for method, by_k in measured:
        for k, result in by_k.items():
            if result.speedup is None or not k.isdigit():
                continue
            bounds = result.intervals.of("speedup") if result.intervals else None
            found.append(Candidate(
                method=method, k=int(k), speedup=result.speedup, low=bounds[0] if bounds else None,
                high=bounds[1] if bounds else None, tokens_per_s=result.tokens_per_s_speculative,
                mean_acceptance_length=result.mean_acceptance_length,
            ))  # fmt: skip
    return found


def candidates_at(evaluation: Evaluation, concurrency: int) -> list[Candidate]:
    """Every candidate vLLM's bench measured at `concurrency` (point estimates: no interval above concurrency 1)."""
    speedups = evaluation.bench.speedup if evaluation.bench else {}
    found: list[Candidate] = []
    for candidate in candidates_at_one(evaluation)[1:]:
        server = f"{SERVER_PREFIX[candidate.method]}{candidate.k}"
        speedup = speedups.get(server, {}).get(str(concurrency))
        if speedup is not None:
            found.append(Candidate(method=candidate.method, k=candidate.k, speedup=speedup))
    return found


def tournament(
    evaluation: Evaluation, min_speedup: float, drafter_margin: float, run_concurrency: int,
    decided_by: DecidingConcurrency,
) -> Tournament:  # fmt: skip
    """The winner at concurrency 1 and, where the bench measured every candidate there, at the run's concurrency (a
    candidate left out, e.g. n-gram in an evaluation from before its server was benched, would lose unheard)."""
    entrants = candidates_at_one(evaluation)
    at_one = choose(entrants, min_speedup, drafter_margin)
    at_run_measured = candidates_at(evaluation, run_concurrency) if run_concurrency != 1 else []
    complete = bool(at_run_measured) and len(at_run_measured) == len(entrants) - 1  # all but the target alone
    at_run = choose(at_run_measured, min_speedup, drafter_margin) if complete else None
    return Tournament(at_one=at_one, at_run=at_run, run_concurrency=run_concurrency, decided_by=decided_by)


def winner_config(winner: Candidate, drafter_dir: str, schedule: KSchedule | None = None) -> dict[str, Any] | None:
    """The `--speculative-config` production runs with the winner, drafting per `schedule` where one is given (the
    host's vLLM varies k with the batch size); None for the target alone (nothing to change)."""
    if winner.method == "target" or winner.k is None:
        return None
    config = drafter_config(drafter_dir, winner.k) if winner.method == "eagle3" else ngram_config(winner.k)
    return schedule.applied(config) if schedule is not None else config
