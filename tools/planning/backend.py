"""Which extraction backend a run uses, and why, in one sentence with the numbers it was decided on.

`vllm` serves the target with production's parallel layout and captures the states as vLLM computes them: the
only way for a model that does not fit one GPU (transformers' device_map="auto" is the wrong tool for a 540 GB
MoE), and the fast way where the host's vLLM has the method and GPUs are free beside production. `hf` runs a
transformers forward pass and needs no server: the choice everywhere else, a CPU host included, except for a
quantized checkpoint (a `quantization_config` in the model's config.json: compressed-tensors, AWQ, GPTQ, fp8...),
which transformers' plain forward pass cannot run, so the plan never chooses hf for one. The run size
`extraction_backend` overrides the choice; the gate then says what the plan would have chosen, and an hf asked for a
quantized checkpoint is refused there (`refused`, which blocks the extract phase: tools/planning/paths.py).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from eyas.tools.errors import EyasError
from eyas.tools.hosts.host import Host
from eyas.tools.planning.gpu_budget import (
    MIB,
    WORKSPACE_SHARE,
    GpuBudgetInputs,
    ProductionImpact,
    gpu_phrase,
    weights_bytes,
)

Backend = Literal["hf", "vllm"]


class BackendChoice(BaseModel):
    """plan["extraction"]: the backend extraction runs with, what the run asked for, and why."""

    backend: Backend
    requested: str  # the run size: auto, hf or vllm
    reason: str
    refused: str | None = None  # why the backend the run asks for cannot extract from this model, and the fix

    @model_serializer(mode="wrap")
    def _without_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent unless refused, so a plan recorded before the field existed dumps as it was read (replays match).
        return {key: value for key, value in handler(self).items() if key != "refused" or value is not None}


class Quantization(BaseModel):
    """The checkpoint's quantization, from the `quantization_config` of its config.json (a wrapper's text_config
    too, where a multimodal model keeps its language model's)."""

    method: str  # quant_method: compressed-tensors, awq, gptq, fp8, ...
    weights: str | None = None  # the weights' format where the config says it: INT4, 4-bit

    def describe(self) -> str:
        return f"{self.method}, {self.weights} weights" if self.weights else self.method


def read_quantization(config: dict[str, Any]) -> Quantization | None:
    """The quantization a config.json declares, None for a checkpoint in plain floating point."""
    text = config.get("text_config")
    found = config.get("quantization_config") or (text.get("quantization_config") if isinstance(text, dict) else None)
    if not isinstance(found, dict):
        return None
    groups = found.get("config_groups")
    weights: dict[str, Any] = {}
    if isinstance(groups, dict):  # compressed-tensors: each group's weights scheme, the first one named
        first = next((group.get("weights") for group in groups.values() if isinstance(group, dict)), None)
        weights = first if isinstance(first, dict) else {}
    bits = weights.get("num_bits") or found.get("bits") or found.get("w_bit")
    kind = weights.get("type")
    shape = f"{kind.upper()}{bits}" if isinstance(kind, str) and bits else (f"{bits}-bit" if bits else None)
    return Quantization(method=str(found.get("quant_method") or "unnamed"), weights=shape)


def model_quantization(host: Host | None, model_dir: str | None) -> Quantization | None:
    """The served model's quantization, read from its config.json on the host; None when it has none, or when the
    directory is not known or its config.json cannot be read (the plan then decides without it)."""
    if host is None or model_dir is None:
        return None
    try:
        config = json.loads(host.read_text(f"{model_dir.rstrip('/')}/config.json"))
    except (EyasError, ValueError):
        return None
    return read_quantization(config) if isinstance(config, dict) else None


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB" if value < 1e12 else f"{value / 1e12:.2f} TB"


def planned_backend(
    inputs: GpuBudgetInputs,
    extract: ProductionImpact,
    vllm_works: bool | None,
    quantization: Quantization | None = None,
) -> BackendChoice:
    """The plan's own choice (see the module's rules). `extract` is the extract phase's production impact;
    `vllm_works` what the compat check found for the vllm path (None: not known); `quantization` the checkpoint's."""
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    served = (
        f"served with production's layout (tensor {layout.tensor_parallel_size} x pipeline "
        f"{layout.pipeline_parallel_size} = {shards} GPU(s))"
    )
    whole = weights_bytes(inputs) * (1 + WORKSPACE_SHARE)
    largest = max((gpu.memory_total_mib for gpu in inputs.gpus), default=0) * MIB
    cannot = "which the hf backend (a plain transformers forward pass) cannot run"
    if inputs.gpus and whole > largest:
        also = f"; it is a quantized checkpoint too ({quantization.describe()}), {cannot}" if quantization else ""
        return BackendChoice(
            backend="vllm", requested="auto",
            reason=f"vllm: the model needs {_gb(whole)} with its workspace, more than the largest GPU's "
            f"{_gb(largest)}, so it is {served}{also}",
        )  # fmt: skip
    if quantization is not None:
        lacking = " (this host's vLLM lacks the extract_hidden_states method: see the extract phase's path)"
        return BackendChoice(
            backend="vllm", requested="auto",
            reason=f"vllm: the model is a quantized checkpoint ({quantization.describe()}), {cannot}, so it is "
            f"{served}{lacking if vllm_works is False else ''}",
        )  # fmt: skip
    if not inputs.gpus:
        return BackendChoice(
            backend="hf", requested="auto",
            reason=f"hf: the host has no GPU, so transformers runs the {_gb(weights_bytes(inputs))} model on the "
            "CPU with no server to start",
        )  # fmt: skip
    fits = f"the {_gb(whole)} model fits one {_gb(largest)} GPU"
    if vllm_works is not True:
        missing = "lacks" if vllm_works is False else "could not be checked for"
        return BackendChoice(
            backend="hf", requested="auto",
            reason=f"hf: {fits}, and this host's vLLM {missing} the extract_hidden_states method",
        )  # fmt: skip
    if extract.action != "keep":
        return BackendChoice(
            backend="hf", requested="auto",
            reason=f"hf: {fits}, but the GPUs are not free for a vLLM server ({extract.reason})",
        )  # fmt: skip
    return BackendChoice(
        backend="vllm", requested="auto",
        reason=f"vllm: {fits}, this host's vLLM has extract_hidden_states, and {gpu_phrase(extract.gpus)} have the "
        f"{_gb(extract.memory_bytes)} it needs free beside production",
    )  # fmt: skip


def hf_refusal(quantization: Quantization, model_dir: str | None) -> str:
    """Why the hf backend, asked for by the run, cannot extract from a quantized checkpoint, and the way out."""
    where = model_dir or "the served model"
    return (
        f"extract (hf) cannot extract from this model: {where} is a quantized checkpoint ({quantization.describe()}: "
        "the quantization_config of its config.json), and the hf backend loads it through transformers with "
        'device_map="auto", a plain forward pass that cannot run these quantized weights. Use the vllm '
        "backend, which serves the checkpoint as production does, with production's layout: set the size "
        "extraction_backend to vllm (or auto, which chooses vllm for a quantized model) with an edit at a gate, "
        '`eyas run --extraction-backend vllm`, or extraction_backend = "vllm" under [pipeline] in the config.'
    )


def choose_backend(
    requested: str,
    inputs: GpuBudgetInputs,
    extract: ProductionImpact,
    vllm_works: bool | None,
    host: Host | None = None,
    model_dir: str | None = None,
) -> BackendChoice:
    """The run's backend: the size's when it names one (the reason says what the plan would have chosen; an hf
    that cannot load the checkpoint is `refused`), else the plan's. `host` and `model_dir` are where the model's
    config.json says whether it is quantized (neither given: not known, as for a plan with no host)."""
    quantization = model_quantization(host, model_dir)
    planned = planned_backend(inputs, extract, vllm_works, quantization)
    if requested == "auto":
        return planned
    backend: Backend = "hf" if requested == "hf" else "vllm"
    refused = hf_refusal(quantization, model_dir) if backend == "hf" and quantization is not None else None
    return BackendChoice(
        backend=backend, requested=requested, refused=refused,
        reason=f"{requested}: the run's size extraction_backend asks for it (the plan would choose {planned.reason})",
    )  # fmt: skip
