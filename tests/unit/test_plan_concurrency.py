"""The rehearsal host (tests/unit/test_rehearsal_plan.py) with production up: the plan's generation hours come from a
probe at the run's own concurrency, against a production stand-in whose rate grows with the requests in flight
(tests/support/batching_server.py: a GPU server, which cannot run here). Probed at 16 the same server is about 10x
slower than at 200, so a plan probed at the wrong concurrency would be measurably wrong; nvidia-smi is the stand-in
of the 8-GPU host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_rehearsal_plan import SIZES, rehearsal_host

from batching_server import Steps, batching_server, natural_tokens
from eyas.graph.context import RunContext
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.estimate import Plan, estimate
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.measure import Measured, measure_inputs
from eyas.tools.planning.plan_text import verdict
from eyas.tools.planning.prompt_count import probe_prompts
from eyas.tools.settings.units import parse_size
from nvidia_smi_standin import install_nvidia_smi

RUN_CONCURRENCY = 200


@pytest.fixture
def production(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RunContext, Steps]]:
    """The rehearsal host with production up: the batching stand-in serves the Kimi model from its directory."""
    ctx, _ = rehearsal_host(tmp_path, parse_size("2.9TB"))
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    target = ctx.config.target
    with batching_server(target.model, str(tmp_path / "Kimi-K2.5")) as (url, batcher):
        ctx.config = ctx.config.model_copy(update={"target": target.model_copy(update={"base_url": url})})
        yield ctx, batcher


def planned(ctx: RunContext, concurrency: int, probe_concurrency: int | None = None) -> tuple[Plan, Measured]:
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
    return estimate(measured.inputs), measured


def true_mean_answer() -> float:
    """The stand-in's answers to the run's source (the shipped prompts, first turns), on average: what the whole
    data phase would really generate per sample."""
    prompts = probe_prompts(1000)
    return sum(min(SIZES.max_tokens, natural_tokens(prompt)) for prompt in prompts) / len(prompts)


def truth_hours(batcher: Steps, concurrency: int, questions: float) -> float:
    """25,000 samples of `questions` answers each (generate.py's rule over the conversations, which
    test_answer_sample.py checks) at the stand-in's own rate with `concurrency` requests in flight, as its full steps
    really ran (the probe's waves)."""
    return SIZES.samples * questions * true_mean_answer() / batcher.measured_rate(concurrency) / 3600


def questions(measured: Measured) -> float:
    assert measured.inputs.answers is not None
    return measured.inputs.answers.requests_per_sample


def test_generation_is_planned_at_the_runs_concurrency_within_1_5x_of_the_truth(
    production: tuple[RunContext, Steps],
) -> None:
    ctx, batcher = production
    plan, measured = planned(ctx, RUN_CONCURRENCY)
    truth = truth_hours(batcher, RUN_CONCURRENCY, questions(measured))
    assert truth / 1.5 <= plan.generation_hours <= truth * 1.5, (plan.generation_hours, truth)
    # Planned on a sample of real answers, with the worst case (every answer at max_tokens) beside it.
    answers = measured.sources["answers"]
    assert plan.tokens_from == "sampled" and answers.startswith("32 prompts of the run's source answered"), answers
    answer = (plan.tokens_per_sample - measured.inputs.prompt_tokens) / questions(measured)
    assert true_mean_answer() / 1.5 < answer < true_mean_answer() * 1.5
    worst = plan.worst_case
    assert worst is not None and worst.generation_hours > plan.generation_hours * 5
    assert plan.disk_tokens_per_sample is not None and plan.disk_tokens_per_sample > plan.tokens_per_sample
    assert worst.needed_bytes > plan.needed_bytes * 5 and not worst.fits and plan.fits
    said = verdict(measured.inputs, plan)
    assert "Worst case, every answer at max_tokens: generation" in said


def test_a_probe_at_another_concurrency_says_so_and_is_measurably_wrong(production: tuple[RunContext, Steps]) -> None:
    ctx, batcher = production
    at_16, measured = planned(ctx, RUN_CONCURRENCY, probe_concurrency=16)
    truth = truth_hours(batcher, RUN_CONCURRENCY, questions(measured))
    assert at_16.generation_hours > truth * 3  # the old probe's error: why the probe runs at the run's concurrency
