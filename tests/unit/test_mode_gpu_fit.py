"""A hidden-state mode the GPUs cannot hold is never chosen. The rehearsal host (tests/unit/test_rehearsal_plan.py)
with 8 x H100 80 GB instead of H200s: the 5.9 TB of hidden states do not fit 2.9 TB, and hybrid would fit the disk,
but its extraction server with production's layout (0.92 of each GPU, as production's launch claims it) and the
24.9 GB trainer beside it do not fit these GPUs even with production stopped. The plan says so before the data gate,
offers only the ways out that can run, and a policy refuses the gate (the run would otherwise find out inside
production's downtime, after ten hours of generation). With H200s the same plan trains hybrid."""

from __future__ import annotations

from pathlib import Path

from test_rehearsal_plan import rehearsal_host

from eyas.graph.context import RunContext
from eyas.graph.gates.view import gate_view
from eyas.graph.phases.plan.node import made_plan
from eyas.graph.policy import Policy
from eyas.graph.state import RunPlan, RunState, run_plan, run_sizes
from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.settings.sizes import Sizes
from eyas.tools.settings.units import parse_size

H100_MIB = 81559
GENEROUS = Policy(allow_production_stop=True, max_production_downtime_hours=10_000, allow_warnings=True)


def replanned_on_h100s(ctx: RunContext, state: RunState) -> RunPlan:
    """The state's plan made again by the plan node's own code with 8 H100s, production holding 93% of each."""
    held = int(H100_MIB * 0.93)
    state["gpus"] = {
        "count": 8,
        "gpus": [{"index": i, "memory_total_mib": H100_MIB, "memory_free_mib": H100_MIB - held, "production": True}
                 for i in range(8)],
        "production": None,
    }  # fmt: skip
    figures = Figures(
        **planned_sizes(run_sizes(state)), hidden_size=7168, num_layers=61, vocab_size=163840,
        free_disk_bytes=state["free_disk_bytes"], generation_tok_s=1500.0, data_path=ctx.config.host().workdir,
    )  # fmt: skip
    measured = measure_inputs(figures, config=ctx.config, host=None, http=HttpClient())
    return made_plan(ctx, state, measured, count_prompts(None, figures))


def test_hybrid_is_refused_where_the_gpus_cannot_hold_it_and_the_gate_says_why(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    state["plan"] = replanned_on_h100s(ctx, state).model_dump(mode="json")
    plan = run_plan(state)
    mode = plan.extraction_mode
    assert mode is not None and mode.mode == "offline" and plan.fits is False
    assert mode.gpu_refusal is not None and "even with production stopped" in mode.gpu_refusal
    # The lower memory share as a way out, with its figure: Kimi's INT4 weights alone (74.2 GB of each H100) and the
    # trainer are more than a GPU holds, so no --gpu-memory-utilization the plan could choose makes room.
    assert "no lower --gpu-memory-utilization makes room: the weights alone take 74.2 GB" in mode.gpu_refusal
    assert plan.verdict is not None and plan.verdict.startswith("Does not fit")
    assert "Not online or hybrid: the GPUs cannot hold online training" in plan.verdict
    ways = {way.kind for way in plan.alternatives}
    assert "online_extraction" not in ways and {"fewer_samples", "shorter_samples"} <= ways
    ctx.policy = GENEROUS
    policy = gate_view("data", state, ctx, []).policy
    assert policy is not None and not policy.approve and "the plan does not fit" in policy.reasons


def test_asked_for_hybrid_where_the_gpus_cannot_hold_it_does_not_fit(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"), sizes=Sizes(
        samples=25_000, max_tokens=4096, max_seq_len=8192, extraction_mode="hybrid"))  # fmt: skip
    plan = run_plan(state)
    assert plan.extraction_mode is not None and plan.extraction_mode.mode == "hybrid" and plan.fits is True  # H200s
    refused = replanned_on_h100s(ctx, state)
    mode = refused.extraction_mode
    assert mode is not None and mode.mode == "hybrid" and refused.fits is False
    assert "it cannot run here: the GPUs cannot hold online training" in mode.reason
    assert refused.verdict is not None and refused.verdict.startswith("Cannot run hybrid")
