"""The report's training curves from a drafter's metrics.jsonl, as a resumed run leaves it."""

from __future__ import annotations

import itertools
import json

from eyas.graph.phases.report.node import CURVE_POINTS, training_curves, training_lines


def row(split: str, step: int, loss: float, epoch: int = 0) -> str:
    return json.dumps({"split": split, "step": step, "epoch": epoch, "loss": loss, "acc": [0.5, 0.25]})


def test_a_resumed_runs_repeated_steps_count_once_and_torn_lines_are_skipped() -> None:
    lines = [row("train", 1, 9.0), row("train", 2, 8.0), row("train", 2, 7.5), row("val", 2, 7.9), '{"split": "tr']
    curves = training_curves("\n".join(lines))
    assert [(r["step"], r["loss"]) for r in curves["train"]] == [(1, 9.0), (2, 7.5)]
    assert [(r["step"], r["loss"]) for r in curves["val"]] == [(2, 7.9)]
    text = "\n".join(training_lines(curves))
    assert "| 0 | 2 | 7.900 | 0.500, 0.250 |" in text and "Last step 2: training loss 7.500" in text


def test_long_runs_keep_at_most_the_curve_points_evenly_and_the_last_step() -> None:
    steps = 10 * CURVE_POINTS + 7
    curves = training_curves("\n".join(row("train", step, 1.0 / step) for step in range(1, steps + 1)))
    kept = [r["step"] for r in curves["train"]]
    assert len(kept) <= CURVE_POINTS and kept[-1] == steps and kept == sorted(kept)
    assert len({b - a for a, b in itertools.pairwise(kept)}) == 1


def test_a_validation_row_without_an_epoch_or_a_loss_reads_n_a_not_none() -> None:
    """speculators' trainer (train_cuda.py) may log a validation row with neither: the table says so in words."""
    no_epoch = json.dumps({"split": "val", "step": 154, "epoch": None, "loss": None, "acc": []})
    text = "\n".join(training_lines(training_curves(no_epoch)))
    assert "| n/a | 154 | n/a |" in text and "None" not in text
