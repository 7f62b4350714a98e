"""The report's training curves: a moving average drawn over the faint curve as measured, starting at the first
value and leaving gaps as gaps, and a log axis when the values span more than 10x (an early spike squashes the rest
on a linear one)."""

from __future__ import annotations

import pytest

from eyas.agents.faces.report_html.charts import Series, ema, line_chart


def test_the_moving_average_starts_at_the_first_value_and_keeps_gaps() -> None:
    assert ema([4.0, None, 4.0, 4.0]) == pytest.approx([4.0, None, 4.0, 4.0])
    noisy = [0.0, 10.0] * 50
    smoothed = ema(noisy)
    assert smoothed[0] == 0.0
    late = [value for value in smoothed[20:] if value is not None]
    assert max(late) - min(late) < 5  # the raw curve swings by 10 at every step
    assert sum(late) / len(late) == pytest.approx(5, abs=0.5)


@pytest.mark.parametrize(("losses", "log"), [([120.0, 40.0, 9.0, 8.5], True), ([12.0, 10.0, 9.0, 8.5], False)])
def test_a_loss_that_spans_more_than_10x_gets_a_log_axis(losses: list[float], log: bool) -> None:
    steps = [1.0, 2.0, 3.0, 4.0]
    chart = line_chart("loss", "Loss", "step", "loss", [Series("training", steps, losses, smoothed=True)],
                       log_when_wide=True)  # fmt: skip
    assert ("loss (log scale)" in chart.svg) == log
    assert "training, as measured" in chart.svg and "training, moving average" in chart.svg
    assert chart.points == 4  # the average is drawn, not counted as data
