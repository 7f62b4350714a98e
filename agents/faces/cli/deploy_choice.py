"""What `eyas deploy RUN` puts into production: the method and k asked for, else the evaluation's winner by the
run's policy, as the deploy gate proposes it."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from eyas.graph.policy import Policy
from eyas.tools.errors import EyasError
from eyas.tools.workloads.speculative import DRAFTER_METHOD, NGRAM_METHOD, drafter_config, ngram_config

if TYPE_CHECKING:
    from eyas.graph.state import RunState


class HandChoice(NamedTuple):
    """What `eyas deploy` puts into production, and why that."""

    speculative: dict[str, Any]
    method: str  # vLLM's speculative method: eagle3 or ngram
    k: int
    ngram_speedup: float | None  # n-gram's evaluated speedup at a drafter's k: the bar production's counters must beat
    why: str


def hand_choice(
    run_id: str, state: RunState, policy: Policy, drafter_dir: str, method: str | None, k: int | None
) -> HandChoice:
    """The method and k given, else the evaluation's winner by the run's policy (what the deploy gate proposes);
    the drafter at the run's k where nothing was evaluated. Where the evaluation found nothing faster than the target
    alone, asking for no method is refused: there is nothing to deploy that measured faster."""
    from eyas.graph.phases.evaluate.record import Evaluation
    from eyas.graph.policy import deploy_tournament
    from eyas.graph.state import run_sizes

    evaluation = state.get("evaluation")
    sizes = run_sizes(state)
    found = deploy_tournament(policy, evaluation, sizes.concurrency)
    winner = found.choice.winner if found is not None else None
    if method is None and winner is not None and winner.method == "target":
        assert found is not None
        raise EyasError(
            f"Nothing beat the target alone in run {run_id}'s evaluation ({found.choice.reason}), so there is "
            "nothing measured faster to deploy and production is left as it is. To try one anyway, name it: "
            "--method eagle3 (the drafter) or --method ngram, with --k; production's own counters still decide "
            "whether it stays."
        )
    if method is None:
        method = winner.method if winner is not None else DRAFTER_METHOD
    if k is None:
        k = winner.k if winner is not None and winner.method == method and winner.k else sizes.num_speculative_tokens
    if winner is not None and (winner.method, winner.k) == (method, k):
        assert found is not None
        why = f"the evaluation's winner, {winner.name}: {found.choice.reason}"
    elif winner is not None:
        why = f"as asked (the evaluation's winner was {winner.name})"
    else:
        why = "the drafter at the run's k (nothing was evaluated)"
    ngram = Evaluation.model_validate(evaluation).ngram_at(k) if evaluation and method == DRAFTER_METHOD else None
    speculative = drafter_config(drafter_dir, k) if method == DRAFTER_METHOD else ngram_config(k)
    return HandChoice(speculative, method, k, ngram.speedup if ngram else None, why)


class SpeculativeMethod(StrEnum):
    """The methods a deploy can put into production (vLLM's names)."""

    eagle3 = DRAFTER_METHOD
    ngram = NGRAM_METHOD


MethodOption = Annotated[
    SpeculativeMethod | None,
    typer.Option(
        "--method",
        help="eagle3 (the run's drafter) or ngram (vLLM's n-gram speculation, no drafter); default: the "
        "evaluation's winner by the run's policy, as the deploy gate proposes it",
    ),
]
