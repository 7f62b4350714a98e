"""The rehearsal host (tests/unit/test_rehearsal_plan.py) with production up: the plan's generation hours come from a
probe at the run's own concurrency, against a production stand-in whose rate grows with the requests in flight
(tests/support/batching_server.py: a GPU server, which cannot run here). Probed at 16 the same server is about 7x
slower than at 200, so a plan probed at the wrong concurrency would be measurably wrong; nvidia-smi is the stand-in
of the 8-GPU host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_rehearsal_plan import SIZES, rehearsal_host

from batching_server import Batcher, batching_server
from eyas.graph.context import RunContext
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.estimate import estimate
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.settings.units import parse_size
from nvidia_smi_standin import install_nvidia_smi

RUN_CONCURRENCY = 200


@pytest.fixture
def production(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RunContext, Batcher]]:
    """The rehearsal host with production up: the batching stand-in serves the Kimi model from its directory."""
    ctx, _ = rehearsal_host(tmp_path, parse_size("2.9TB"))
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    target = ctx.config.target
    with batching_server(target.model, str(tmp_path / "Kimi-K2.5")) as (url, batcher):
        ctx.config = ctx.config.model_copy(update={"target": target.model_copy(update={"base_url": url})})
        yield ctx, batcher


def planned_generation_hours(ctx: RunContext, concurrency: int, probe_concurrency: int | None = None) -> float:
    sizes = SIZES.model_copy(update={"concurrency": concurrency})
    figures = Figures(**planned_sizes(sizes), free_disk_bytes=parse_size("2.9TB"), probe_speeds=False)
    measured = measure_inputs(
        figures, config=ctx.config, host=LocalHost(), http=HttpClient(), probe_concurrency=probe_concurrency
    )
    assert measured.throughput is not None
    assert measured.throughput.concurrency == (probe_concurrency or concurrency)
    shape = measured.sources["throughput"]
    assert f"decoding at concurrency {probe_concurrency or concurrency}" in shape
    assert shape.endswith("the run's") == (probe_concurrency in (None, concurrency))
    return estimate(measured.inputs).generation_hours


def truth_hours(batcher: Batcher, concurrency: int) -> float:
    """25,000 answers of 4,096 tokens at the stand-in's own rate with `concurrency` requests in flight."""
    return SIZES.samples * SIZES.max_tokens / batcher.true_rate(concurrency) / 3600


def test_generation_is_planned_at_the_runs_concurrency_within_1_5x_of_the_truth(
    production: tuple[RunContext, Batcher],
) -> None:
    ctx, batcher = production
    hours = planned_generation_hours(ctx, RUN_CONCURRENCY)
    truth = truth_hours(batcher, RUN_CONCURRENCY)
    assert truth / 1.5 <= hours <= truth * 1.5, (hours, truth)


def test_a_probe_at_another_concurrency_says_so_and_is_measurably_wrong(production: tuple[RunContext, Batcher]) -> None:
    ctx, batcher = production
    at_16 = planned_generation_hours(ctx, RUN_CONCURRENCY, probe_concurrency=16)
    truth = truth_hours(batcher, RUN_CONCURRENCY)
    assert at_16 > truth * 3  # the old probe's 7x error: why the probe runs at the run's concurrency
