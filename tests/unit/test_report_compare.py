"""`eyas report RUN --compare RUN2`, run in-process on two runs made from the recorded example: the pages, markdown
and --json put their sizes, evaluations and training side by side, and bad input is one paragraph."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compared_runs import FIRST as A
from compared_runs import SECOND as B
from compared_runs import SECOND_EPOCHS, SECOND_SPEEDUP, folded_output, make_compared_runs
from in_process import eyas


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    folder = tmp_path / "runs"
    monkeypatch.setenv("EYAS_RUNS_DIR", str(folder))
    first, second = make_compared_runs(folder)
    return folder, first, second


def test_compare_writes_the_runs_side_by_side(runs: tuple[Path, str, str]) -> None:
    folder, first, second = runs
    ran = eyas("report", first, "--compare", second, "--json")
    assert ran.code == 0, ran.output
    result = json.loads(ran.stdout)
    assert result["compared"] == [first, second]
    by_run = {one["run_id"]: one for one in result["runs"]}
    recorded = folded_output(folder / first / "transcript.jsonl", "evaluation")
    assert by_run[first]["evaluation"][0]["figures"]["speedup"] == recorded["speedup"]
    assert by_run[second]["evaluation"][0]["figures"]["speedup"] == SECOND_SPEEDUP
    # n-gram speculation beside the drafter, where the evaluation measured it at the drafter's k.
    ngram = (recorded.get("ngram") or {}).get(str(recorded["k"]), {}).get("speedup")
    assert by_run[first]["evaluation"][0]["figures"]["ngram_speedup"] == ngram
    assert (by_run[first]["sizes"]["epochs"], by_run[second]["sizes"]["epochs"]) == (1, SECOND_EPOCHS)
    steps = len(folded_output(folder / first / "transcript.jsonl", "training")["train"])
    assert [by_run[run]["training"]["steps"] for run in (first, second)] == [steps, steps]
    # The second run's curves were halved (loss) and doubled (tokens/s): the totals follow.
    assert by_run[second]["training"]["final_loss"] == pytest.approx(by_run[first]["training"]["final_loss"] / 2)
    assert by_run[second]["training"]["mean_tokens_per_s"] == pytest.approx(
        by_run[first]["training"]["mean_tokens_per_s"] * 2
    )

    markdown = Path(result["markdown"]).read_text()
    assert Path(result["markdown"]).parent == folder / first
    assert "| **epochs** (differs) | 1 | 2 |" in markdown  # a size that differs is marked; one that agrees is not
    assert "| samples | 24 | 24 |" in markdown
    assert "| eval_ngram | yes | yes |" in markdown  # a switch in words, not Python's True
    assert f"| {second} | 3 |" in markdown and "| 1.250 |" in markdown

    html = Path(result["html"]).read_text()
    loss_points = re.search(r'data-points="(\d+)"[^>]*><svg[^>]*aria-label="compare-loss"', html)
    assert loss_points is not None and int(loss_points.group(1)) == 2 * steps  # both runs' curves, overlaid
    assert 'aria-label="compare-tps"' in html
    assert f'data-key="speedup" data-value="{SECOND_SPEEDUP}"' in html


UNKNOWN = "run-20261201-120000-cccc"


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        ([A, "--compare"], 2, "--compare needs the runs to compare"),
        ([A, B], 2, f"add --compare: `eyas report {A} --compare {B}`"),
        ([A, "--compare", A], 2, "a run is named twice"),
        ([A, "--compare", UNKNOWN], 6, f"There is no run '{UNKNOWN}'"),
    ],
)
def test_bad_comparisons_are_one_paragraph(runs: tuple[Path, str, str], argv: list[str], code: int, says: str) -> None:
    ran = eyas("report", *argv)
    assert ran.code == code, ran.output
    assert says in ran.output and "Traceback" not in ran.output
