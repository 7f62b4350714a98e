"""The plan's GPU budget and the policy over it: on the motivating host (Kimi over tensor-parallel 8, production
holding 93% of every GPU) every GPU phase must stop production; on a roomy host it keeps running; on a CPU host
nothing stops; and an unattended run never stops production unless its policy allows it, within budget."""

from __future__ import annotations

import pytest

from eyas.graph.policy import PhaseEstimate, Policy, judge
from eyas.tools.planning.gpu_budget import (
    GpuBudgetInputs,
    GpuFree,
    ProductionLayout,
    budget,
    default_load_s,
    gpu_phrase,
)
from eyas.tools.planning.model_dims import ModelDims

KIMI = ModelDims(hidden_size=7168, num_layers=61, vocab_size=163840, intermediate_size=18432)
H100_MIB = 81559


def host(free_mib: int, production: bool = True, count: int = 8) -> list[GpuFree]:
    return [
        GpuFree(index=i, memory_total_mib=H100_MIB, memory_free_mib=free_mib, production=production)
        for i in range(count)
    ]


def inputs(gpus: list[GpuFree], **changes: object) -> GpuBudgetInputs:
    base = GpuBudgetInputs(
        model=KIMI,
        model_bytes=540 * 10**9,
        gpus=gpus,
        production=ProductionLayout(tensor_parallel_size=8, load_s=22 * 60, load_source="measured"),
        phase_hours={"extract": 5.0, "train": 10.0, "evaluate": 1.5},
    )
    return base.model_copy(update=changes)


def test_production_at_93_percent_must_stop_for_every_gpu_phase() -> None:
    plan = budget(inputs(host(free_mib=5709)))
    assert plan["data"].action == "reuse" and plan["data"].downtime_hours == 0
    for phase, hours in (("extract", 5.0), ("train", 10.0), ("evaluate", 1.5)):
        impact = plan[phase]
        assert impact.action == "stop", impact.reason
        assert impact.downtime_hours == pytest.approx(hours + 22 / 60)
        assert impact.gpus == list(range(8))
        assert "22 min to load again (measured)" in impact.reason
    # 540 GB over 8 GPUs plus a quarter for KV cache and activations would be 84.4 GB a GPU, more than an H100 holds;
    # production runs the same launch in the 79.5 GB it holds on each, so that is what the server needs.
    assert plan["extract"].memory_bytes == 8 * (H100_MIB - 5709) * 1024**2
    assert "extract needs 8 GPU(s) x 79.5 GB; the most any GPU has free beside production is 6.0 GB" in (
        plan["extract"].reason
    )
    assert "the most any GPU has free beside production is 6.0 GB" in plan["train"].reason


def test_a_phase_that_fits_beside_production_keeps_it() -> None:
    gpus = [*host(free_mib=5709), GpuFree(index=8, memory_total_mib=H100_MIB, memory_free_mib=H100_MIB)]
    plan = budget(inputs(gpus, model_bytes=8 * 10**9, production=ProductionLayout(load_s=600)))
    assert plan["train"].action == "keep" and plan["train"].gpus == [8] and plan["train"].downtime_hours == 0
    assert plan["extract"].action == "keep" and plan["extract"].gpus == [8]


def test_a_phase_larger_than_the_host_says_so() -> None:
    # Not production's GPUs (what production holds would bound the need: it runs the same launch there).
    plan = budget(inputs(host(free_mib=5709, production=False), model_bytes=1200 * 10**9))
    assert plan["extract"].action == "stop" and "even without production" in plan["extract"].reason


def test_unknown_phase_hours_leave_the_downtime_unknown_and_a_cpu_host_keeps_production() -> None:
    plan = budget(inputs(host(free_mib=5709), phase_hours={}))
    assert plan["extract"].action == "stop" and plan["extract"].downtime_hours is None
    cpu = budget(inputs([]))
    assert {impact.action for impact in cpu.values()} == {"keep", "reuse"}
    assert all(impact.downtime_hours == 0 for impact in cpu.values())


def test_load_time_default_follows_the_motivating_host() -> None:
    assert default_load_s(540 * 10**9) == pytest.approx(1350)  # 22.5 minutes
    assert default_load_s(10**6) == 60


@pytest.mark.parametrize(
    ("policy", "downtime", "approve", "says"),
    [
        (Policy(), 5.4, False, "does not allow_production_stop"),
        (Policy(allow_production_stop=True), None, True, "production stops for an unknown time (allowed"),
        (Policy(allow_production_stop=True, max_production_downtime_hours=6), 5.4, True, "within the budget of 6 h"),
        (Policy(allow_production_stop=True, max_production_downtime_hours=4), 5.4, False, "over the budget of 4 h"),
        (Policy(allow_production_stop=True, max_production_downtime_hours=4), None, False, "unknown time is over"),
    ],
)
def test_policy_on_a_phase_that_stops_production(
    policy: Policy, downtime: float | None, approve: bool, says: str
) -> None:
    estimate = PhaseEstimate(phase_hours=5.0, production_action="stop", downtime_hours=downtime)
    verdict = judge(policy, "extract", estimate, {})
    assert verdict.approve is approve and says in verdict.summary


def test_policy_ignores_production_it_keeps_or_reuses() -> None:
    for action in ("keep", "reuse", None):
        assert judge(Policy(), "data", PhaseEstimate(production_action=action), {}).approve


@pytest.mark.parametrize(
    ("gpus", "phrase"),
    [([], "no GPU"), ([3], "GPU 3"), ([7, 6, 5, 4, 3, 2, 1, 0], "GPUs 0-7"), ([0, 2, 5], "GPUs 0, 2, 5")],
)
def test_gpu_indices_read_as_a_person_writes_them(gpus: list[int], phrase: str) -> None:
    assert gpu_phrase(gpus) == phrase
