"""Where training's hidden states come from: offline when they fit the disk, hybrid (the first K samples on disk,
the rest fetched online every epoch) or online when they do not, each with its bound and hours; what an explicit
mode and a vLLM without extract_hidden_states do; the train phase's GPU budget with its extraction server; and the
train phase's path, which needs vLLM's extraction path online."""

from __future__ import annotations

import math

import pytest

from eyas.tools.checks.compat import judge
from eyas.tools.planning.estimate import FILE_HEADER_BYTES, PlanInputs, estimate
from eyas.tools.planning.gpu_budget import (
    MIB,
    GpuBudgetInputs,
    GpuFree,
    ProductionLayout,
    budget,
    online_train_fit,
    serve_bytes_per_gpu,
    train_bytes,
)
from eyas.tools.planning.hidden_states_mode import choose_mode, mode_verdict
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.paths import phase_paths
from eyas.tools.planning.plan_text import verdict
from eyas.tools.planning.reserve import RESERVE_FLOOR_BYTES, disk_reserve_bytes
from eyas.tools.settings.units import format_size, parse_size
from eyas.tools.workloads.hidden_states_file import HEADER_ALLOWANCE
from model_shapes import SMOLLM2

KIMI = ModelDims(hidden_size=7168, num_layers=61, vocab_size=163840, intermediate_size=18432)
H200_MIB = 143771


def kimi(**changes: object) -> PlanInputs:
    figures = {
        "model": KIMI, "samples": 25_000, "max_tokens": 4096, "max_seq_len": 8192, "generation_tok_s": 2000.0,
        "free_disk_bytes": parse_size("2.9TB"), "data_path": "/data",
    }  # fmt: skip
    return PlanInputs.model_validate(figures | changes)


def per_sample(tokens: float) -> tuple[float, float]:
    """One sample's hidden-state file and its token file, from the shapes: 4 captured layers x 7,168 bf16 values
    and an int64 id per token; a token file holds the id and a bool mask."""
    return tokens * (7168 * 4 * 2 + 8) + FILE_HEADER_BYTES, tokens * (8 + 1) + FILE_HEADER_BYTES


BOUND = 8 * (8192 * (7168 * 4 * 2 + 8 + 1) + HEADER_ALLOWANCE)  # 8 samples of 8,192 tokens, as the server writes


def test_hidden_states_that_fit_stay_offline_and_the_verdict_is_the_estimate_s() -> None:
    inputs = PlanInputs(
        model=SMOLLM2, samples=313, max_tokens=256, prompt_tokens=47, generation_tok_s=87.0,
        free_disk_bytes=parse_size("75GB"),
    )  # fmt: skip
    plan = estimate(inputs)
    mode = choose_mode("auto", inputs, plan, True)
    assert (mode.mode, mode.offline_samples, mode.bound_bytes, mode.fetched, mode.online) == (
        "offline", None, 0, 0, False,
    )  # fmt: skip
    assert (mode.fits, mode.needed_bytes, mode.extract_bytes) == (True, plan.needed_bytes, plan.hidden_state_bytes)
    assert (mode.extract_hours, mode.train_hours) == (plan.extraction_hours, plan.training_hours)
    assert mode.reason.startswith(f"offline: the hidden states ({format_size(plan.hidden_state_bytes)}) fit the ")
    assert mode_verdict(inputs, plan, mode) == verdict(inputs, plan)


def test_hybrid_keeps_the_first_samples_that_fit_and_fetches_the_rest_every_epoch() -> None:
    """Kimi's 5.9 TB on 2.9 TB: K is the most samples whose hidden states fit beside the generated data, the
    checkpoints, the other samples' token files, the online bound and the reserve."""
    inputs = kimi()
    plan = estimate(inputs)
    mode = choose_mode("auto", inputs, plan, True)
    assert not plan.fits and mode.mode == "hybrid" and mode.fits and mode.runnable is True
    k = mode.offline_samples
    assert k is not None and 0 < k < 25_000 and mode.fetched == 25_000 - k
    hidden, tokens = per_sample(4096)

    def disk(kept: int) -> float:
        return kept * hidden + (25_000 - kept) * tokens + plan.data_bytes + plan.checkpoint_bytes + BOUND

    room = parse_size("2.9TB") - disk_reserve_bytes(parse_size("2.9TB"))
    assert disk(k) <= room < disk(k + 1)
    assert mode.bound_bytes == BOUND and mode.needed_bytes == math.ceil(disk(k))
    # Online pays the prefill of the fetched share once per epoch, on top of training.
    assert mode.online_hours == pytest.approx(plan.extraction_hours * (25_000 - k) / 25_000 * 3)
    assert mode.train_hours == pytest.approx(plan.training_hours + mode.online_hours)
    assert mode.extract_hours == pytest.approx(plan.extraction_hours * k / 25_000)
    assert mode.reason.startswith("hybrid: the hidden states (5.87 TB) do not fit the 2.90 TB free at /data, so ")
    assert f"the first {k:,} of the 25,000 samples (in the generated file's order) keep" in mode.reason
    assert f"at most {format_size(BOUND)} of them on disk at once (8 samples)" in mode.reason
    said = mode_verdict(inputs, plan, mode)
    assert said.startswith("Fits hybrid: ") and "online prefill over 3 epoch(s)" in said
    assert "Ways out" not in said


def test_online_when_not_one_sample_fits_beside_the_rest() -> None:
    first = estimate(kimi())
    hidden, tokens = per_sample(4096)
    # Room for everything online needs and less than one more sample's hidden states.
    online = first.data_bytes + first.checkpoint_bytes + 25_000 * tokens + BOUND
    inputs = kimi(free_disk_bytes=math.ceil(online + RESERVE_FLOOR_BYTES + (hidden - tokens) / 2))
    plan = estimate(inputs)
    mode = choose_mode("auto", inputs, plan, True)
    assert (mode.mode, mode.offline_samples, mode.fetched, mode.extracts_nothing) == ("online", 0, 25_000, True)
    assert mode.fits and mode.extract_hours == 0 and mode.extract_bytes == math.ceil(25_000 * tokens)
    assert mode.online_hours == pytest.approx(plan.extraction_hours * 3)
    assert "every one of the 25,000 samples is fetched online every epoch (extraction only tokenizes)" in mode.reason
    assert "extraction tokenizing only" in mode_verdict(inputs, plan, mode)
    # Less than online needs: nothing fits, and the plan says so instead of choosing a mode that cannot fit.
    small = kimi(free_disk_bytes=math.floor(online))
    none = choose_mode("auto", small, estimate(small), True)
    assert none.mode == "offline" and not none.fits and "neither would online training" in none.reason


def test_a_vllm_without_extract_hidden_states_keeps_offline_and_offers_no_online_way_out() -> None:
    inputs = kimi()
    plan = estimate(inputs)
    mode = choose_mode("auto", inputs, plan, False)
    assert mode.mode == "offline" and not mode.fits and mode.runnable is False
    lacks = "hybrid training would fit the disk, but this host's vLLM lacks the extract_hidden_states method"
    assert lacks in mode.reason
    said = mode_verdict(inputs, plan, mode)
    # The estimate's other ways out stay; training online is not offered where it cannot run.
    assert (
        said.startswith("Does not fit") and "generate 12,038 samples instead of 25,000" in said
    )  # 2.9 TB less its 58 GB reserve
    assert "online" not in said
    # Asked for all the same: kept, and said to be unable to run here.
    asked = choose_mode("online", inputs, plan, False)
    assert asked.mode == "online" and asked.runnable is False and "it cannot run here" in asked.reason
    assert "It cannot run here: this host's vLLM lacks" in mode_verdict(inputs, plan, asked)
    # Not known (no compat check, as `eyas plan` plans): chosen, and the reason says it was not checked.
    unknown = choose_mode("auto", inputs, plan, None)
    assert unknown.mode == "hybrid" and "could not be checked for the extract_hidden_states method" in unknown.reason


def test_an_explicit_mode_is_kept_and_says_what_the_plan_would_choose() -> None:
    inputs = kimi()
    plan = estimate(inputs)
    planned = choose_mode("auto", inputs, plan, True)
    offline = choose_mode("offline", inputs, plan, True)
    assert (offline.mode, offline.requested, offline.fits) == ("offline", "offline", False)
    assert offline.reason == (
        "offline: the run's size extraction_mode asks for it (the plan would choose hybrid, the first "
        f"{planned.offline_samples:,} samples on disk)"
    )
    assert "--extraction-mode online" in mode_verdict(inputs, plan, offline)  # the way out it still has
    online = choose_mode("online", inputs, plan, True)
    assert (online.mode, online.offline_samples, online.fits) == ("online", 0, True)
    assert online.needed_bytes < planned.needed_bytes and online.online_hours > planned.online_hours


def h200s(free_share: float, count: int = 8, production: bool = True) -> list[GpuFree]:
    return [
        GpuFree(index=i, memory_total_mib=H200_MIB, memory_free_mib=int(H200_MIB * free_share), production=production)
        for i in range(count)
    ]


def online_inputs(gpus: list[GpuFree], **changes: object) -> GpuBudgetInputs:
    layout = ProductionLayout(
        tensor_parallel_size=8, load_s=22 * 60, load_source="measured", gpu_memory_utilization=0.92
    )
    base = GpuBudgetInputs(
        model=KIMI, model_bytes=594 * 10**9, gpus=gpus, production=layout,
        phase_hours={"extract": 7.0, "train": 40.0, "evaluate": 1.0}, online=True,
    )  # fmt: skip
    return base.model_copy(update=changes)


def test_production_at_93_percent_stops_for_online_training_and_the_server_gives_the_trainer_room() -> None:
    inputs = online_inputs(h200s(0.07))
    fit = online_train_fit(inputs)
    impact = fit.impact
    server, trainer = serve_bytes_per_gpu(inputs), train_bytes(inputs)
    assert server == math.ceil(594e9 / 8 * 1.25)  # weights over tensor-parallel 8, plus the workspace
    assert impact.action == "stop" and impact.downtime_hours == pytest.approx(40.0 + 22 / 60)
    assert impact.gpus == list(range(8)) and impact.memory_bytes == 8 * server + trainer
    # With production stopped, its 0.92 would leave the trainer too little on the GPU it shares with the server.
    total = H200_MIB * MIB
    assert 0.92 * total + trainer > total
    assert fit.memory_utilization == math.floor((total - trainer) / total * 100) / 100
    assert fit.memory_utilization is not None and fit.memory_utilization * total >= server
    assert f"runs at --gpu-memory-utilization {fit.memory_utilization:.2f}, as production's 0.92" in impact.reason
    assert "the most any GPU has free beside production is" in impact.reason and "22 min to load" in impact.reason
    assert budget(inputs)["train"] == impact


def test_online_training_that_fits_beside_production_keeps_it() -> None:
    # Production on 8 GPUs elsewhere; 8 GPUs with 80% free hold the server (at a lowered share), a 9th the trainer.
    gpus = [*h200s(0.8, production=False), GpuFree(index=8, memory_total_mib=H200_MIB, memory_free_mib=H200_MIB)]
    fit = online_train_fit(online_inputs(gpus))
    assert fit.impact.action == "keep" and fit.impact.downtime_hours == 0 and fit.impact.gpus == list(range(9))
    assert fit.memory_utilization == math.floor(int(H200_MIB * 0.8) / H200_MIB * 100) / 100
    # The server on eight of the nine, the trainer on a GPU of its own.
    reason = fit.impact.reason
    assert "the trainer, free beside production" in reason and "GPUs 0, 1, 2, 3, 4, 5, 6, 8 hold the server" in reason
    # All free: production's own share leaves room, and nothing is lowered.
    free = [*h200s(1.0, production=False), GpuFree(index=8, memory_total_mib=H200_MIB, memory_free_mib=H200_MIB)]
    roomy = online_train_fit(online_inputs(free))
    assert roomy.impact.action == "keep" and roomy.memory_utilization is None


def test_a_model_too_large_for_the_host_and_the_cpu_host_and_an_extract_phase_that_only_tokenizes() -> None:
    big = online_train_fit(online_inputs(h200s(0.07), model_bytes=1400 * 10**9))
    assert big.impact.action == "stop" and "even without production" in big.impact.reason
    assert big.memory_utilization is None
    cpu = budget(online_inputs([]))
    assert cpu["train"].action == "keep" and "trainer and its extraction server run on CPU" in cpu["train"].reason
    tokenizing = budget(online_inputs(h200s(0.07), tokenize_only=True))["extract"]
    assert (tokenizing.action, tokenizing.gpus, tokenizing.memory_bytes) == ("keep", [], 0)
    assert budget(online_inputs(h200s(0.07)))["extract"].action == "stop"  # hybrid extracts K samples: a server


def test_an_online_train_phase_needs_the_vllm_extraction_path_and_its_server_flags() -> None:
    features = {"extract_hidden_states": False, "last_layer_capture": False, "speculators_eagle3": True,
                "transformers_causal_lm": True, "eagle3_method": True}  # fmt: skip
    compat = {"versions": {"vllm": "0.10.1"}, "table": [row.model_dump() for row in judge({"features": features})]}
    flags = {"servers": {"extraction": {"missing": ["--kv-transfer-config"]}}}
    offline = phase_paths(compat, flags, "hf", cuda=False)
    assert offline["train"].path == "cpu loop / speculators" and offline["train"].blocked is None
    online = phase_paths(compat, flags, "hf", cuda=False, online=True)["train"]
    assert online.path == "cpu loop / speculators + online vllm"
    assert online.blocked is not None and "extract_hidden_states speculative method" in online.blocked
    assert "its extraction server passes --kv-transfer-config" in online.blocked


def test_on_cuda_the_plan_says_what_speculators_dataset_does_differently() -> None:
    """On a GPU host speculators' own dataset fetches (train_cuda.online_workers keeps the bound); the gate's row "on
    CUDA" says what it does not do: count per epoch, or stop at a sample whose hidden states are for other tokens.
    The one-paragraph verdict stays the plan's (issue 38: ~100 words of it in every verdict buried the plan). On a
    CPU host nothing is said, and a host not measured (None) is told."""
    cuda_inputs = kimi(train_gpus=8)
    plan = estimate(cuda_inputs)
    cuda = choose_mode("auto", cuda_inputs, plan, True)
    rows = dict(cuda.lines())
    assert "the 8 GPUs at most 8 workers in all, so the bound holds" in rows["on CUDA"]
    assert "eyas counts nothing per epoch there" in rows["on CUDA"]
    assert "asked for three times, then skipped with a warning" in rows["on CUDA"]
    said = mode_verdict(cuda_inputs, plan, cuda)
    assert said.startswith("Fits hybrid") and "dataloader worker" not in said and "On CUDA" not in said, said
    cpu_inputs = kimi(train_gpus=0)
    cpu = choose_mode("auto", cpu_inputs, estimate(cpu_inputs), True)
    assert "on CUDA" not in dict(cpu.lines()) and "speculators" not in mode_verdict(cpu_inputs, plan, cpu)
    assert cpu.model_dump()["train_gpus"] == 0
    unknown = choose_mode("auto", kimi(), plan, True)
    assert "on CUDA" in dict(unknown.lines()) and "train_gpus" not in unknown.model_dump()  # as plans recorded it
    offline = choose_mode("offline", cuda_inputs, plan, True)
    assert "on CUDA" not in dict(offline.lines()) and "speculators" not in mode_verdict(cuda_inputs, plan, offline)
