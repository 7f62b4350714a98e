"""How evaluate.py orders its measurements so that load cannot fake a speedup (eval_runs.py), and the rule that says
when the evaluation's speedup and vLLM's benchmark's disagree (speed_agreement.py, bench_serve.py's interval). The
measurement on real servers, with the machine loaded half-way, is tests/integration/test_evaluation_under_load.py."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import bench_serve
import eval_runs
import speed_agreement
from speed_agreement import Speedup


def test_the_rotation_puts_every_server_first_equally_often_and_keeps_them_all() -> None:
    turns = [eval_runs.rotation(3, turn) for turn in range(6)]
    assert turns[:3] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]] and turns[3:] == turns[:3]
    assert all(sorted(order) == [0, 1, 2] for order in turns)
    assert [order[0] for order in turns].count(0) == 2
    assert [eval_runs.rotation(2, turn) for turn in range(3)] == [[0, 1], [1, 0], [0, 1]]


class Recorded:
    """Stand-in for eval_runs.ServerRun (a vLLM server cannot run in a unit test): what it was asked, in order."""

    def __init__(self, name: str, calls: list[tuple[str, ...]]) -> None:
        self.name, self.calls = name, calls

    def warm_up(self, messages: Any) -> None:
        self.calls.append(("warm-up", self.name))

    def one(self, messages: Any) -> float:
        self.calls.append(("one", self.name, messages))
        return 10.0

    def block(self, prompts: Sequence[Any], pool: ThreadPoolExecutor) -> float:
        self.calls.append(("block", self.name, *prompts))
        return 20.0


def test_interleaving_sends_each_prompt_to_every_server_in_a_rotating_order_after_every_warm_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[tuple[str, ...]] = []
    runs = [Recorded("baseline", calls), Recorded("speculative-k3", calls)]
    eval_runs.measure_interleaved(runs, ["p0", "p1", "p2"], concurrency=1)  # type: ignore[arg-type]
    assert calls == [
        ("warm-up", "baseline"), ("warm-up", "speculative-k3"),
        ("one", "baseline", "p0"), ("one", "speculative-k3", "p0"),
        ("one", "speculative-k3", "p1"), ("one", "baseline", "p1"),
        ("one", "baseline", "p2"), ("one", "speculative-k3", "p2"),
    ]  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and '"phase":"interleaved","done":2,"total":3' in lines[1]
    assert '"tokens_per_s":{"speculative-k3":10.0,"baseline":10.0}' in lines[1]


class UnderLoad(Recorded):
    """Stand-in for a server whose tokens/s halve once the machine is loaded: the load starts when half of all the
    timed prompts (every server's together) are done, as another job starting mid-evaluation would."""

    def __init__(self, name: str, calls: list[tuple[str, ...]], tokens_per_s: float, load_after: int) -> None:
        super().__init__(name, calls)
        self.tokens_per_s, self.load_after, self.rates = tokens_per_s, load_after, list[float]()

    def one(self, messages: Any) -> float:
        super().one(messages)
        timed = sum(call[0] == "one" for call in self.calls)
        self.rates.append(self.tokens_per_s / (2 if timed > self.load_after else 1))
        return self.rates[-1]

    def result(self) -> dict[str, Any]:
        return {}


def speedup_under_a_load_from_half_way(measure: str) -> float:
    calls: list[tuple[str, ...]] = []
    prompts = [f"p{index}" for index in range(6)]
    baseline, drafter = (UnderLoad(name, calls, rate, load_after=len(prompts)) for name, rate in
                         (("baseline", 10.0), ("speculative-k3", 15.0)))  # fmt: skip
    if measure == "interleaved":
        eval_runs.measure_interleaved([baseline, drafter], prompts, concurrency=1)  # type: ignore[list-item]
    else:
        for run in (baseline, drafter):
            eval_runs.measure_in_turn(run, prompts, concurrency=1)  # type: ignore[arg-type]
    return sum(drafter.rates) / sum(baseline.rates)


def test_a_load_that_starts_half_way_leaves_the_interleaved_speedup_true_where_in_turn_it_halves() -> None:
    """Why evaluate.py interleaves: in turn, the baseline ran quiet and the drafter loaded, and the load shows up as
    a slower drafter (0.75x for a true 1.5x); interleaved, each server meets the load on as many prompts."""
    assert speedup_under_a_load_from_half_way("interleaved") == pytest.approx(1.5)
    assert speedup_under_a_load_from_half_way("in turn") == pytest.approx(0.75)


def test_above_concurrency_one_blocks_of_that_many_prompts_are_interleaved(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[str, ...]] = []
    runs = [Recorded("baseline", calls), Recorded("ngram-k3", calls)]
    eval_runs.measure_interleaved(runs, ["p0", "p1", "p2", "p3", "p4"], concurrency=2)  # type: ignore[arg-type]
    assert [call for call in calls if call[0] == "block"] == [
        ("block", "baseline", "p0", "p1"), ("block", "ngram-k3", "p0", "p1"),
        ("block", "ngram-k3", "p2", "p3"), ("block", "baseline", "p2", "p3"),
        ("block", "baseline", "p4"), ("block", "ngram-k3", "p4"),
    ]  # fmt: skip
    assert '"done":5,"total":5' in capsys.readouterr().out.splitlines()[-1]


def test_two_speedups_disagree_only_where_their_intervals_do_not_overlap() -> None:
    evaluation = Speedup(0.75, [0.61, 0.91])
    assert speed_agreement.disagree(evaluation, Speedup(1.37, [1.2, 1.5]))
    assert not speed_agreement.disagree(evaluation, Speedup(1.0, [0.9, 1.1]))  # they touch at 0.90-0.91
    assert speed_agreement.disagree(evaluation, Speedup(1.37, None))  # a bare point outside the interval
    assert not speed_agreement.disagree(evaluation, Speedup(0.8, None))
    assert not speed_agreement.disagree(Speedup(0.75, None), Speedup(1.37, None))  # nothing says how far either moves


def test_a_disagreement_names_both_figures_and_that_the_interleaved_evaluation_decides() -> None:
    result = {"k": 3, "speedup": 0.75, "intervals": {"speedup": [0.61, 0.91]}}
    agreeing = {"k": 1, "speedup": 1.3, "intervals": {"speedup": [1.2, 1.4]}}
    bench = {
        "speedup": {"speculative-k3": {"1": 1.37, "4": 1.1}, "speculative-k1": {"1": 1.35}},
        "speedup_interval": {"speculative-k3": {"1": [1.2, 1.5]}, "speculative-k1": {"1": [1.3, 1.4]}},
    }
    (found,) = speed_agreement.disagreements([result, agreeing], bench, 1, eval_runs.INTERLEAVED)
    assert found["server"] == "speculative-k3" and found["decides"] == "evaluation"
    assert found["evaluation"] == {"value": 0.75, "interval": [0.61, 0.91]}
    assert found["bench"] == {"value": 1.37, "interval": [1.2, 1.5]}
    assert "0.75x [0.61, 0.91]" in found["note"] and "1.37x [1.20, 1.50]" in found["note"]
    assert "The evaluation decides: it sent each prompt to both servers moments apart" in found["note"]
    in_turn = speed_agreement.disagreements([result], bench, 1, eval_runs.IN_TURN)[0]["note"]
    assert "measure again on a quiet host" in in_turn
    # Compared at the evaluation's own concurrency only; a bench that did not run there says nothing.
    assert speed_agreement.disagreements([result], bench, 2, eval_runs.INTERLEAVED) == []


def test_the_bench_speedup_interval_pairs_requests_at_concurrency_one_and_leaves_them_out_of_the_result() -> None:
    def run(tokens: list[int], seconds: list[float]) -> dict[str, Any]:
        detailed = {"output_throughput": sum(tokens) / sum(seconds), "output_lens": tokens, "latencies": seconds}
        return bench_serve.kept(detailed)

    # The drafter's server is twice as fast on every request, though the requests' lengths differ: exactly 2.
    servers = {
        "baseline": {"1": run([10, 40, 20], [1.0, 4.0, 2.0]), "4": run([10], [1.0])},
        "speculative-k3": {"1": run([10, 40, 20], [0.5, 2.0, 1.0]), "4": run([10], [0.4])},
    }
    summary = bench_serve.bench_summary(servers, {"prompts": 3}, [1, 4], 3, 64)
    assert summary["speedup"]["speculative-k3"] == {"1": pytest.approx(2.0), "4": pytest.approx(2.5)}
    assert summary["speedup_interval"] == {"speculative-k3": {"1": [pytest.approx(2.0), pytest.approx(2.0)]}}
    assert all(bench_serve.PER_REQUEST not in run for runs in summary["servers"].values() for run in runs.values())
    assert bench_serve.PER_REQUEST in servers["baseline"]["1"]  # kept while evaluate.py works

    # One request much faster than the rest: the interval widens around the figure.
    servers["speculative-k3"]["1"] = run([10, 40, 20], [0.1, 4.0, 2.0])
    low, high = bench_serve.speedup_intervals(servers)["speculative-k3"]["1"]
    assert low < 7 / 6.1 < high
