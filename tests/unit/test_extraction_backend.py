"""The extraction backend knows the checkpoint's quantization: a `quantization_config` in the model's config.json
(Kimi-K2.5's compressed-tensors INT4, AWQ, GPTQ, fp8) rules out the hf backend, whose plain transformers forward
pass with device_map="auto" cannot run it. The plan never chooses hf for such a model, where it would for the same
model unquantized, and an hf the run asks for is refused with the fix. The config.json is read from a real model
directory on this machine (LocalHost); the GPU budget's inputs are those the plan hands the choice."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.backend import Quantization, choose_backend, model_quantization, read_quantization
from eyas.tools.planning.gpu_budget import GpuBudgetInputs, GpuFree, ProductionLayout, phase_impact
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.paths import PhasePath, with_backend
from model_shapes import KIMI_K25_CONFIG

# An 8B model on a host with one free 80 GB GPU beside production: it fits one GPU, so hf is the plan's choice for
# it while this host's vLLM cannot be checked for extract_hidden_states, and vllm for the same model quantized.
SMALL = ModelDims(hidden_size=4096, num_layers=32, vocab_size=128256, intermediate_size=14336)
GPUS = [GpuFree(index=0, memory_total_mib=81559, memory_free_mib=81000)]
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def inputs(gpus: list[GpuFree] = GPUS) -> GpuBudgetInputs:
    return GpuBudgetInputs(
        model=SMALL, model_bytes=16 * 10**9, gpus=gpus, production=ProductionLayout(load_s=300),
        phase_hours={"extract": 2.0},
    )  # fmt: skip


def model_dir(tmp_path: Path, config: dict[str, object]) -> str:
    directory = tmp_path / "model"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def test_the_quantization_is_read_from_the_config_or_its_text_config() -> None:
    kimi = Quantization(method="compressed-tensors", weights="INT4")
    assert read_quantization(KIMI_K25_CONFIG) == kimi
    assert kimi.describe() == "compressed-tensors, INT4 weights"
    inside = copy.deepcopy(KIMI_K25_CONFIG)
    inside["text_config"]["quantization_config"] = inside.pop("quantization_config")  # type: ignore[index]
    assert read_quantization(inside) == kimi  # where a wrapper keeps its language model's
    assert read_quantization({"quantization_config": AWQ}) == Quantization(method="awq", weights="4-bit")
    assert read_quantization({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}) == Quantization(
        method="fp8"
    )
    plain = {key: value for key, value in KIMI_K25_CONFIG.items() if key != "quantization_config"}
    assert read_quantization(plain) is None


def test_the_plan_reads_it_on_the_host_and_decides_without_it_when_it_cannot(tmp_path: Path) -> None:
    host = LocalHost()
    assert model_quantization(host, model_dir(tmp_path, KIMI_K25_CONFIG)) == read_quantization(KIMI_K25_CONFIG)
    assert model_quantization(host, str(tmp_path / "absent")) is None
    (tmp_path / "model" / "config.json").write_text("{not json")
    assert model_quantization(host, str(tmp_path / "model")) is None
    assert model_quantization(host, None) is None and model_quantization(None, str(tmp_path)) is None


def test_auto_never_chooses_hf_for_a_quantized_checkpoint(tmp_path: Path) -> None:
    host, plain = LocalHost(), model_dir(tmp_path / "plain", {"hidden_size": 4096})
    quantized = model_dir(tmp_path, {"hidden_size": 4096, "quantization_config": AWQ})
    for gpus in (GPUS, []):  # a GPU the model fits, and no GPU at all
        budget = inputs(gpus)
        extract = phase_impact(budget, "extract")
        assert choose_backend("auto", budget, extract, None, host, plain).backend == "hf"
        chosen = choose_backend("auto", budget, extract, None, host, quantized)
        assert chosen.backend == "vllm" and chosen.refused is None
        assert chosen.reason.startswith("vllm: the model is a quantized checkpoint (awq, 4-bit weights), which the hf")
    lacking = choose_backend("auto", inputs(), phase_impact(inputs(), "extract"), False, host, quantized)
    assert lacking.backend == "vllm" and "lacks the extract_hidden_states method" in lacking.reason


def test_an_hf_asked_for_a_quantized_checkpoint_is_refused_with_the_fix(tmp_path: Path) -> None:
    host, quantized = LocalHost(), model_dir(tmp_path, KIMI_K25_CONFIG)
    budget = inputs()
    extract = phase_impact(budget, "extract")
    asked = choose_backend("hf", budget, extract, True, host, quantized)
    assert asked.backend == "hf" and asked.refused is not None
    assert asked.refused.startswith(
        f"extract (hf) cannot extract from this model: {quantized} is a quantized checkpoint"
    )
    assert "--extraction-backend vllm" in asked.refused and "\n" not in asked.refused
    assert asked.model_dump()["refused"] == asked.refused
    # vllm asked for, or hf for a model in plain floating point: nothing is refused, and the dump has no such key.
    assert choose_backend("vllm", budget, extract, True, host, quantized).refused is None
    plain = choose_backend("hf", budget, extract, True, host, model_dir(tmp_path / "plain", {"hidden_size": 1}))
    assert plain.refused is None and "refused" not in plain.model_dump()

    # The refusal blocks the extract phase's path, beside what the host's packages block.
    path = PhasePath(path="hf", rows=[], missing_flags=[], blocked="extract (hf) cannot work on this host: old")
    blocked = with_backend({"extract": path}, asked)["extract"].blocked
    assert blocked == f"extract (hf) cannot work on this host: old; {asked.refused}"
    assert with_backend({"extract": path}, plain) == {"extract": path}
