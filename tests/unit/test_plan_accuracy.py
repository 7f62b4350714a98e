"""Planned against actual time per phase, as the report shows it and bench_plan.py prints it."""

from __future__ import annotations

import pytest

from eyas.agents.faces.report_html.plan_accuracy import phase_times
from eyas.agents.faces.report_html.record import RunRecord, Span


def test_a_phase_takes_the_time_of_its_nodes_and_training_includes_the_vocabulary() -> None:
    spans = [
        Span(row="data", kind="step", start=0, end=5),  # launch_data
        Span(row="data", kind="step", start=5, end=125),  # monitor_data
        Span(row="gate extract", kind="wait", start=125, end=3725),  # an hour waiting for the operator
        Span(row="extract", kind="step", start=3725, end=3785),
        Span(row="vocab", kind="step", start=3785, end=3800),
        Span(row="train", kind="failure", start=3800, end=3830),  # failed, retried
        Span(row="train", kind="step", start=3900, end=4155),
    ]
    plan = {"phases": {"data": {"phase_hours": 0.05}, "extract": {"phase_hours": 0.5}, "train": {"phase_hours": 0.1}}}
    record = RunRecord(run_id="r", state={"plan": plan}, spans=spans)
    times = {t.phase: t for t in phase_times(record)}
    assert list(times) == ["data", "extract", "train"]  # evaluate neither planned nor run
    assert times["data"].actual_s == 125 and times["data"].ratio == pytest.approx(180 / 125)
    assert times["extract"].actual_s == 60  # the gate's wait is not the phase's time
    assert times["train"].actual_s == 15 + 30 + 255 and times["train"].ratio == pytest.approx(360 / 300)


def test_a_phase_planned_but_never_run_has_no_ratio() -> None:
    record = RunRecord(run_id="r", state={"plan": {"phases": {"evaluate": {"phase_hours": None}, "data": {}}}})
    assert phase_times(record) == []
    record = RunRecord(run_id="r", state={"plan": {"phases": {"train": {"phase_hours": 0.5}}}})
    (train,) = phase_times(record)
    assert train.actual_s is None and train.ratio is None
