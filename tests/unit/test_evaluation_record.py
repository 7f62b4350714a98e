"""The evaluation is kept in the run's state as evaluate.py's plain JSON and read back typed (`run_evaluation`): the
recorded example's figures read as numbers with their intervals, a run measured at several k reads as one result
per k, a figure evaluate.py adds later is kept, and a malformed one is refused where it is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from eyas.graph.phases.evaluate.record import Evaluation, run_evaluation
from eyas.graph.phases.report.drafter_card import evaluation_lines
from eyas.graph.phases.report.node import side_by_side_rows

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline" / "evaluation.json"


def test_the_recorded_evaluation_reads_typed_with_its_intervals() -> None:
    recorded = json.loads(EXAMPLE.read_text())
    evaluation = run_evaluation({"evaluation": recorded})
    assert evaluation is not None and evaluation.k == recorded["k"]
    assert evaluation.speedup == recorded["speedup"] and evaluation.figure("max_tokens") == recorded["max_tokens"]
    assert evaluation.intervals is not None
    assert evaluation.intervals.of("speedup") == tuple(recorded["intervals"]["speedup"])
    assert evaluation.intervals.of("no such measure") is None
    assert list(evaluation.results_by_k()) == [str(recorded["k"])]
    assert evaluation.model_dump(mode="json") == recorded  # nothing lost, nothing added


def test_several_k_read_as_one_result_each_and_no_evaluation_as_none() -> None:
    evaluation = Evaluation.model_validate(
        {"by_k": {"1": {"k": 1, "mean_acceptance_length": 1.4}, "3": {"k": 3, "mean_acceptance_length": 1.9}}}
    )
    assert {k: result.mean_acceptance_length for k, result in evaluation.results_by_k().items()} == {"1": 1.4, "3": 1.9}
    assert run_evaluation({}) is None and run_evaluation({"evaluation": None}) is None


def test_an_acceptance_only_evaluation_has_no_speeds_and_a_bad_figure_is_refused() -> None:
    evaluation = Evaluation.model_validate({"k": 3, "mean_acceptance_length": 1.2, "per_position": [0.2, 0.0, 0.0]})
    assert evaluation.speedup is None and evaluation.figure("tokens_per_s_baseline") is None
    with pytest.raises(ValidationError):
        Evaluation.model_validate({"k": 3, "speedup": "fast"})


def test_the_three_side_by_side_and_an_evaluation_without_n_gram_says_so() -> None:
    """An evaluation from before evaluations measured n-gram speculation (the example's, without its n-gram figures)
    still reads, and says so."""
    recorded = {key: value for key, value in json.loads(EXAMPLE.read_text()).items() if key != "ngram"}
    before = Evaluation.model_validate(recorded)
    alone, ngram, drafter = before.side_by_side()
    assert (alone.name, ngram.name, drafter.name) == ("target alone", "n-gram", "drafter")
    assert alone.tokens_per_s == recorded["tokens_per_s_baseline"] and drafter.speedup == recorded["speedup"]
    assert not ngram.measured and ngram.summary() == "n-gram not measured" and before.ngram_speedup() is None
    assert side_by_side_rows(before)[1] == ("n-gram", "n-gram not measured", "n/a", "n/a")
    # evaluate.py --ngram's figures, by k: the drafter's k is the one compared; prompt lookup may draft nothing.
    k = str(recorded["k"])
    ngrams = {k: {"k": recorded["k"], "mean_acceptance_length": None, "tokens_per_s_speculative": 12.25,
                  "speedup": 1.1}, "9": {"k": 9, "speedup": 3.0}}  # fmt: skip
    after = Evaluation.model_validate({**recorded, "ngram": ngrams})
    assert after.ngram_speedup() == 1.1 and after.side_by_side()[1].summary() == (
        "12.2 tokens/s, no drafts accepted, speedup 1.10x"
    )
    assert side_by_side_rows(after)[1] == ("n-gram", "12.250", "n/a", "1.100")
    assert side_by_side_rows(after)[0][3] == "1 (the reference)"
    assert after.model_dump(mode="json")["ngram"][k]["speedup"] == 1.1  # kept as evaluate.py wrote it
    # The drafter's model card says how n-gram did beside it, or that it was not measured.
    assert (
        evaluation_lines(after)[-1]
        == "- n-gram speculation (no drafter): 12.2 tokens/s, no drafts accepted, speedup 1.10x"
    )
    assert evaluation_lines(before)[-1] == "- n-gram speculation (no drafter): not measured"
