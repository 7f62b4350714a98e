"""What a run's last screen says in numbers: each figure to the digits its measurement holds (tools/settings/units.py
`figure`, through which rates and ratios are printed), and production's expected restart said as unknown, not as a
load time "estimated from the weights' 0 GB", where nothing measured the weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from eyas.agents.faces.progress_text import detail_text, rate_text
from eyas.graph.context import RunContext
from eyas.graph.phases.plan.node import production_load
from eyas.graph.runs import RunDir
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.gpu_budget import default_load_s
from eyas.tools.settings.config import load_config
from eyas.tools.settings.units import figure
from jobs_config import jobs_config


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (16.460, "16.5"),
        (0.82705, "0.827"),
        (12.318, "12.3"),
        (1234.4, "1,234"),  # a whole number's digits are never rounded away
        (9.996, "10.0"),  # three digits after the rounding, not 10.00
        (0.000123456, "0.000123"),
        (-3.14159, "-3.14"),
        (0.0, "0"),
        (float("nan"), "nan"),
    ],
)
def test_a_figure_keeps_three_significant_digits(value: float, shown: str) -> None:
    assert figure(value) == shown


def test_rates_in_progress_lines_read_to_their_significant_digits() -> None:
    assert rate_text(16.46) == "16.5 tokens/s" and rate_text(1234.4) == "1,234 tokens/s"
    assert detail_text({"tokens_per_s": {"baseline": 15.7, "speculative-k3": 12.318}}) == (
        "baseline 15.7, speculative-k3 12.3 tokens/s"
    )


def context(tmp_path: Path, load_time_s: str = "") -> RunContext:
    path = jobs_config(tmp_path / "eyas.toml", tmp_path / "work")
    if load_time_s:
        path.write_text(path.read_text().replace('model = "m"', f'model = "m"\nload_time_s = {load_time_s}'))
    return RunContext(config=load_config(path), host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK,
                      run=RunDir(tmp_path / "runs" / "r1"))  # fmt: skip


@pytest.mark.parametrize("weights", [None, 0])
def test_a_restart_whose_weights_are_unknown_says_so(tmp_path: Path, weights: int | None) -> None:
    load_s, source = production_load(context(tmp_path), {}, weights)
    assert (load_s, source) == (default_load_s(0), "assumed: the weights' size is unknown")


def test_a_restart_estimated_from_small_weights_names_their_size(tmp_path: Path) -> None:
    """SmolLM2's 269 MB read "0 GB" at whole gigabytes."""
    _, source = production_load(context(tmp_path), {}, 269_060_000)
    assert source == "estimated from the weights' 0.269 GB"


def test_a_measured_or_configured_load_time_wins_over_the_weights(tmp_path: Path) -> None:
    configured = context(tmp_path, load_time_s="1320")
    assert production_load(configured, {}, 0) == (1320.0, "target.load_time_s in the config")
    stopped = {"production": {"stops": [{"load_s": 95.0}]}}
    assert production_load(configured, stopped, 0) == (95.0, "measured when this run last restarted production")  # type: ignore[arg-type]
