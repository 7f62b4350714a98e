import math
from pathlib import Path

import pytest

from eyas.tools.checks.vllm_metrics import Sample, SpecDecodeCounters, parse_prometheus, summarize_vllm_metrics

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def test_parse_prometheus_escapes_special_values_and_timestamps() -> None:
    text = (
        "# HELP odd A metric with awkward labels.\n"
        '\nodd{path="C:\\\\tmp",quote="say \\"hi, there\\"",nl="a\\nb",} +Inf 1700000000000\n'
        "odd_nan NaN\n"
        'odd{le="-Inf"} -3.5e-2\n'
    )
    first, nan, last = parse_prometheus(text)
    assert first == Sample(
        name="odd", labels={"path": "C:\\tmp", "quote": 'say "hi, there"', "nl": "a\nb"}, value=math.inf
    )
    assert nan.name == "odd_nan" and nan.labels == {} and math.isnan(nan.value)
    assert last.value == -0.035


def test_parse_prometheus_names_the_bad_line() -> None:
    with pytest.raises(ValueError, match=r"line 2 is not a Prometheus sample .*'<html>'"):
        parse_prometheus("ok 1\n<html>\n")
    with pytest.raises(ValueError, match=r"line 1 is not a Prometheus sample .*unquoted"):
        parse_prometheus("bad{x=unquoted} 1")


def test_fixture_parses_histogram_buckets() -> None:
    samples = parse_prometheus((FIXTURES / "vllm_metrics.txt").read_text())
    inf_bucket = next(s for s in samples if s.labels.get("le") == "+Inf")
    assert inf_bucket.name == "vllm:time_to_first_token_seconds_bucket"
    assert inf_bucket.value == 48.0


def test_summarize_sums_over_engines() -> None:
    metrics = summarize_vllm_metrics((FIXTURES / "vllm_metrics.txt").read_text())
    assert (metrics.requests_running, metrics.requests_waiting) == (5.0, 1.0)
    assert metrics.kv_cache_usage == pytest.approx(0.0390625)  # a fraction per engine: their mean
    spec = metrics.spec_decode
    assert spec == SpecDecodeCounters(
        num_drafts=3000, num_draft_tokens=9000, num_accepted_tokens=5326, accepted_per_pos={0: 2400, 1: 1770, 2: 1156}
    )
    assert spec.mean_acceptance_length == pytest.approx(1 + 5326 / 3000)
    assert spec.acceptance_rate == pytest.approx(5326 / 9000)
    assert spec.per_position_rate == pytest.approx({0: 0.8, 1: 0.59, 2: 1156 / 3000})


def test_older_vllm_without_spec_decode() -> None:
    metrics = summarize_vllm_metrics('vllm:gpu_cache_usage_perc{model_name="m"} 0.25\n')
    assert metrics.kv_cache_usage == 0.25
    assert metrics.requests_running is None and metrics.spec_decode is None


def test_minus_diffs_scrapes_and_refuses_a_restart() -> None:
    before = SpecDecodeCounters(num_drafts=100, num_draft_tokens=300, num_accepted_tokens=150, accepted_per_pos={0: 80})
    after = SpecDecodeCounters(
        num_drafts=200, num_draft_tokens=600, num_accepted_tokens=350, accepted_per_pos={0: 170, 1: 60}
    )
    window = after.minus(before)
    assert window.accepted_per_pos == {0: 90, 1: 60}
    assert window.mean_acceptance_length == 3.0
    assert window.acceptance_rate == pytest.approx(200 / 300)
    idle = before.minus(before)
    assert (idle.mean_acceptance_length, idle.acceptance_rate, idle.per_position_rate) == (None, None, {})
    with pytest.raises(ValueError, match=r"went backwards .*restarted"):
        before.minus(after)
