"""The choice among the target alone, n-gram and the drafter at each k (tools/service/winner.py), and the tournament
over an evaluation's JSON at both concurrencies (graph/phases/deploy/tournament.py): pure functions, no server."""

from __future__ import annotations

from eyas.graph.phases.deploy.tournament import tournament, winner_config
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.tools.service.k_schedule import KSchedule, k_schedule
from eyas.tools.service.winner import Candidate, choose


def ngram(k: int, speedup: float, low: float | None = None, high: float | None = None) -> Candidate:
    return Candidate(method="ngram", k=k, speedup=speedup, low=low, high=high)


def drafter(k: int, speedup: float, low: float | None = None, high: float | None = None) -> Candidate:
    return Candidate(method="eagle3", k=k, speedup=speedup, low=low, high=high)


def test_the_fastest_wins_when_its_interval_clears_every_simpler_candidate() -> None:
    choice = choose([ngram(3, 1.05, 1.01, 1.09), drafter(1, 1.30, 1.20, 1.40), drafter(3, 0.90, 0.85, 0.95)], 1.0, 0.05)
    assert choice.winner == drafter(1, 1.30, 1.20, 1.40) and choice.pays
    assert choice.reason == "drafter k=1 is fastest: 1.30x [1.20, 1.40] the target alone's tokens/s"


def test_overlapping_intervals_and_ties_go_to_the_simpler_method_and_the_smaller_k() -> None:
    # The drafter's low end (1.08) is not above n-gram's point (1.10): n-gram, the simpler, wins.
    choice = choose([drafter(2, 1.20, 1.08, 1.32), ngram(2, 1.10, 1.04, 1.16)], 1.0, 0.0)
    assert choice.winner.name == "n-gram k=2"
    assert "drafter k=2 (1.20x [1.08, 1.32]) is not measurably faster than the simpler n-gram k=2" in choice.reason
    # An exact tie without intervals: n-gram; between two k of one method: the smaller.
    assert choose([drafter(1, 1.2), ngram(1, 1.2)], 1.0, 0.0).winner.name == "n-gram k=1"
    assert choose([ngram(3, 1.2), ngram(2, 1.2)], 1.0, 0.0).winner.name == "n-gram k=2"
    # The drafter's margin over n-gram (its upkeep): clear by 0.05 is not enough at a margin of 0.1.
    assert choose([drafter(1, 1.3, 1.25, 1.35), ngram(1, 1.2)], 1.0, 0.1).winner.name == "n-gram k=1"
    assert choose([drafter(1, 1.3, 1.25, 1.35), ngram(1, 1.2)], 1.0, 0.0).winner.name == "drafter k=1"


def test_the_lead_passes_down_a_chain_until_nothing_simpler_is_in_reach() -> None:
    # drafter k=2 does not clear drafter k=1, which does not clear n-gram k=1: n-gram wins over both.
    found = [drafter(2, 1.40, 1.25, 1.55), drafter(1, 1.30, 1.15, 1.45), ngram(1, 1.20, 1.10, 1.30)]
    choice = choose(found, 1.0, 0.0)
    assert choice.winner.name == "n-gram k=1" and choice.reason.count("not measurably faster") == 2


def test_nothing_beats_the_target_alone_says_which_came_closest_and_why() -> None:
    # The demo's case: the drafter at 0.75x, n-gram at 1.02x whose interval reaches under 1.
    choice = choose([drafter(3, 0.75, 0.70, 0.80), ngram(3, 1.02, 0.98, 1.06)], 1.0, 0.05)
    assert not choice.pays and choice.winner.method == "target" and choice.closest == ngram(3, 1.02, 0.98, 1.06)
    assert choice.reason == (
        "nothing beats the target alone: the closest, n-gram k=3 at 1.02x [0.98, 1.06], reaches the threshold 1x only "
        "by chance: its interval reaches down to 0.98x"
    )
    choice = choose([drafter(3, 0.75, 0.70, 0.80)], 1.0, 0.05)
    assert choice.reason.endswith("drafter k=3 at 0.75x [0.70, 0.80], is under the threshold 1x")
    assert choose([], 1.0, 0.05).reason == "no speculative method was measured"
    # An operator who lowers the threshold accepts a slower method on purpose.
    assert choose([drafter(3, 0.75, 0.70, 0.80)], 0.5, 0.05).winner.name == "drafter k=3"


def result(speedup: float, low: float, high: float, k: int) -> dict:
    return {"k": k, "speedup": speedup, "mean_acceptance_length": 1.5, "tokens_per_s_speculative": 10 * speedup,
            "intervals": {"speedup": [low, high]}}  # fmt: skip


# At concurrency 16 the drafter's extra compute costs more than it saves: n-gram k=3 is fastest there.
BENCH_SPEEDUP = {
    "speculative-k1": {"1": 1.25, "16": 0.95}, "speculative-k3": {"16": 0.7}, "ngram-k3": {"16": 1.15},
    "ngram-k1": {"16": 1.1},
}  # fmt: skip
EVALUATION = {
    **result(0.90, 0.85, 0.95, 3), "tokens_per_s_baseline": 10.0,
    "by_k": {"3": result(0.90, 0.85, 0.95, 3), "1": result(1.30, 1.20, 1.40, 1)},
    "ngram": {"3": result(1.10, 1.05, 1.15, 3), "1": result(1.05, 1.01, 1.09, 1)},
    "bench": {"speedup": BENCH_SPEEDUP},
}  # fmt: skip


def test_where_the_concurrencies_disagree_the_policy_names_which_decides() -> None:
    evaluation = Evaluation.model_validate(EVALUATION)
    one = tournament(evaluation, 1.0, 0.05, 16, "one")
    assert one.at_one.winner.name == "drafter k=1" and one.at_run is not None
    assert one.at_run.winner.name == "n-gram k=3" and one.choice.winner.name == "drafter k=1"
    assert one.disagreement() == (
        "at concurrency 1 drafter k=1 wins, at concurrency 16 n-gram k=3; the policy's deploy_concurrency = 'one' "
        "decides: concurrency 1"
    )
    run = tournament(evaluation, 1.0, 0.05, 16, "run")
    assert run.choice.winner.name == "n-gram k=3" and "decides: concurrency 16" in (run.disagreement() or "")
    assert winner_config(run.choice.winner, "/d") == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2
    }  # fmt: skip
    assert winner_config(one.choice.winner, "/d") == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 1}
    rows = one.rows()
    assert rows["the target alone"] == "concurrency 1: 1.00x (10.0 tokens/s)"
    assert rows["drafter k=1"] == (
        "concurrency 1: 1.30x [1.20, 1.40] (13.0 tokens/s), acceptance length 1.50; concurrency 16: 0.95x"
    )
    assert (
        rows["n-gram k=1"]
        == "concurrency 1: 1.05x [1.01, 1.09] (10.5 tokens/s), acceptance length 1.50; concurrency 16: 1.10x"
    )
    # Without a bench at the run's concurrency (or a run at concurrency 1) the evaluation decides alone.
    alone = tournament(Evaluation.model_validate({**EVALUATION, "bench": None}), 1.0, 0.05, 16, "run")
    assert alone.at_run is None and alone.choice.winner.name == "drafter k=1" and alone.disagreement() is None
    # A candidate the bench left out at the run's concurrency would lose unheard there: concurrency 1 decides.
    partial = {key: value for key, value in BENCH_SPEEDUP.items() if not key.startswith("ngram-")}
    unfair = tournament(Evaluation.model_validate({**EVALUATION, "bench": {"speedup": partial}}), 1.0, 0.05, 16, "run")
    assert unfair.at_run is None and unfair.choice.winner.name == "drafter k=1"
    assert winner_config(tournament(evaluation, 2.0, 0.05, 16, "one").choice.winner, "/d") is None


def test_one_method_best_at_different_k_by_concurrency_drafts_a_k_per_batch_size() -> None:
    # The drafter wins at both concurrencies, k=3 alone (idle compute pays for deeper drafts) and k=1 at 16.
    by_k = {"3": result(1.60, 1.50, 1.70, 3), "1": result(1.30, 1.20, 1.40, 1)}
    bench = {"speculative-k3": {"16": 0.9}, "speculative-k1": {"16": 1.2}, "ngram-k3": {"16": 1.0}}
    evaluation = Evaluation.model_validate({
        **by_k["3"], "tokens_per_s_baseline": 10.0, "by_k": by_k, "ngram": {"3": result(1.10, 1.05, 1.15, 3)},
        "bench": {"speedup": bench},
    })  # fmt: skip
    found = tournament(evaluation, 1.0, 0.05, 16, "one")
    assert [found.at_one.winner.name, found.at_run and found.at_run.winner.name] == ["drafter k=3", "drafter k=1"]
    schedule = found.k_schedule()
    assert schedule is not None and schedule.ranges() == [[1, 4, 3], [5, 16, 1]]  # the switch at sqrt(1 x 16)
    assert winner_config(found.choice.winner, "/d", schedule) == {
        "method": "eagle3", "model": "/d", "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 1]],
    }  # fmt: skip
    shown = found.k_per_batch_size(applied=True)
    assert shown == (
        "k=3 with up to 4 request(s) in flight, k=1 above (the best k measured at concurrency 1 and at 16; the switch "
        "at their geometric middle)"
    )
    # A vLLM without the schedule: the recommendation, and the one k production drafts.
    told = found.k_per_batch_size(applied=False)
    assert told is not None and told.startswith("recommended: k=3 with up to 4") and "production drafts k=3" in told
    # Nothing to vary: the same k at both, different methods, or no bench at the run's concurrency.
    assert tournament(Evaluation.model_validate(EVALUATION), 1.0, 0.05, 16, "one").k_schedule() is None
    alone = Evaluation.model_validate({**evaluation.model_dump(), "bench": None})
    assert tournament(alone, 1.0, 0.05, 16, "one").k_schedule() is None
    assert k_schedule(2, 2, 200) is None and k_schedule(3, 1, 1) is None
    assert k_schedule(3, 1, 200) == KSchedule(k_few=3, k_many=1, switch_after=14, run_concurrency=200)
    assert k_schedule(3, 1, 2) == KSchedule(k_few=3, k_many=1, switch_after=1, run_concurrency=2)
