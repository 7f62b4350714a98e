"""The demo's closing lines after a rollback name production's own figures and the sizes that explain them."""

from __future__ import annotations

import math
import statistics

import pytest

from eyas.agents.faces.cli.demo_outcome import CURVE, PAYS_AT, per_doubling, rolled_back_lines
from eyas.tools.service.deploy_result import DeployResult, Probe
from eyas.tools.settings.sizes import DEFAULT_SIZES, DEMO


def result(after: Probe | None) -> DeployResult:
    before = Probe(requests=4, completion_tokens=256, seconds=21.7, tokens_per_s=11.8)
    return DeployResult(
        kept=False, reason="acceptance below 1.2", drop_in="/x.conf", drop_in_text="", argv_before=["vllm"],
        argv_deployed=["vllm"], before=before, after=after,
    )  # fmt: skip


def test_the_lines_quote_productions_counters_and_the_demo_sizes() -> None:
    after = Probe(requests=4, completion_tokens=256, seconds=29.8, tokens_per_s=8.6, mean_acceptance_length=1.14)
    lines = rolled_back_lines(result(after), DEMO)
    assert "(acceptance length 1.14 at k=3; 8.6 tokens/s with it, 11.8 without)" in lines[0]
    assert f"{DEMO.samples} samples of up to {DEMO.max_tokens} answer tokens" in lines[0]
    assert f"{DEFAULT_SIZES.samples:,} samples" in lines[2]


def test_the_distance_to_a_paying_drafter_is_read_off_the_measured_curve() -> None:
    """The curve's slope is the least-squares one of its points (each doubling of the data adds about as much), and
    the doublings the lines quote are what that slope needs from the last point to PAYS_AT."""
    tokens, accepted = CURVE[-1]
    first_tokens, first_accepted = CURVE[0]
    fitted = statistics.linear_regression([math.log2(t) for t, _ in CURVE], [a for _, a in CURVE]).slope
    assert per_doubling() == pytest.approx(fitted) and per_doubling() > 0
    doublings = round((PAYS_AT - accepted) / per_doubling())
    line = rolled_back_lines(result(None), DEMO)[0]
    assert f"some {doublings} doublings past {tokens / 1000:.0f}K tokens" in line, line
    assert f"{first_accepted:.2f} at {first_tokens // 1000}K" in line


def test_without_counters_the_lines_still_explain() -> None:
    lines = rolled_back_lines(result(None), DEMO)
    assert lines[0].startswith("Why it was rolled back: at the demo's sizes")
