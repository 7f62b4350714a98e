"""GPU time and memory per phase, and what each phase means for the production server on the same GPUs.

Pure functions over pydantic inputs (the verified GPUs, the model's size, the phase hours), so a plan for a
host that cannot be reached works the same as one measured live. The rules:

- extract and evaluate serve the target model with production's own parallel layout: the weights split over
  production's tensor x pipeline size, plus the KV cache and activations that vLLM's gpu-memory-utilization
  leaves room for (WORKSPACE_SHARE on top of the weights).
- train holds the EAGLE-3 drafter on one GPU with AdamW: bf16 weights and grads plus fp32 master weights and
  two moments per trained parameter, the target's frozen embeddings, and hidden-state batches.
- a phase fits beside production when every GPU it needs has that much free now: action "keep". Otherwise
  production must stop ("stop"), for the phase's hours plus the time production takes to load again.
- the data phase sends its requests to production itself: "reuse", no downtime.
- without a GPU the phases run on CPU beside production: "keep".

Each phase's answer is `plan["phases"][phase]["production"]` in the run's state: the pipeline stops
production around a phase whose action is "stop", and the gates and the dry run show it.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from eyas.tools.planning.estimate import ModelDims
from eyas.tools.settings.sizes import DEFAULT_SIZES

MIB = 1024**2
GPU_PHASES = ("extract", "train", "evaluate")
WORKSPACE_SHARE = 0.25  # KV cache, activations and CUDA graphs on top of a served model's weights
TRAIN_BYTES_PER_PARAMETER = 2 + 2 + 12  # bf16 weights + bf16 grads + fp32 master copy and two AdamW moments
TRAIN_ACTIVATION_BYTES = 4 * 1024**3  # hidden-state batches and activations of one drafter layer
LOAD_BYTES_PER_S = 0.4e9  # the motivating host: 540 GB loaded in about 22 minutes
DEFAULT_BYTES_PER_PARAMETER = 2  # bf16 weights, when nothing measured the model's files

Action = Literal["keep", "stop", "reuse"]


class GpuFree(BaseModel):
    """One GPU as the gpus check saw it."""

    index: int
    memory_total_mib: int
    memory_free_mib: int
    production: bool = False


class ProductionLayout(BaseModel):
    """How production runs: its parallel sizes (from its unit's ExecStart) and how long it takes to load."""

    tensor_parallel_size: int = Field(1, gt=0)
    pipeline_parallel_size: int = Field(1, gt=0)
    load_s: float = Field(gt=0)
    load_source: str = "assumed"


class GpuBudgetInputs(BaseModel):
    model: ModelDims
    model_bytes: int | None = Field(None, gt=0, description="the weights' files; default: estimated from the dims")
    gpus: list[GpuFree] = Field(default_factory=list)
    production: ProductionLayout
    phase_hours: dict[str, float | None] = Field(default_factory=dict)
    draft_vocab_size: int = Field(DEFAULT_SIZES.draft_vocab_size, gt=0)


class ProductionImpact(BaseModel):
    """What one phase needs and what happens to production meanwhile: the gate's and the pipeline's view."""

    action: Action
    downtime_hours: float | None
    gpus: list[int]
    memory_bytes: int
    reason: str


def weights_bytes(inputs: GpuBudgetInputs) -> int:
    """The weights' size: measured files, else a dense estimate from the dims (an MoE model is far larger)."""
    if inputs.model_bytes is not None:
        return inputs.model_bytes
    m = inputs.model
    per_layer = 4 * m.hidden_size**2 + 3 * m.hidden_size * (m.intermediate_size or 4 * m.hidden_size)
    return (m.num_layers * per_layer + 2 * m.vocab_size * m.hidden_size) * DEFAULT_BYTES_PER_PARAMETER


def default_load_s(model_bytes: int) -> float:
    """Production's load time when nothing measured it: the motivating host's rate, at least a minute."""
    return max(60.0, model_bytes / LOAD_BYTES_PER_S)


def train_bytes(inputs: GpuBudgetInputs) -> int:
    """One GPU training the drafter (see the module's rules)."""
    m = inputs.model
    h = m.hidden_size
    mlp = 3 * h * (m.intermediate_size or 4 * h)
    trained = 3 * h * h + 7 * h * h + mlp + h * min(inputs.draft_vocab_size, m.vocab_size)  # as estimate.py counts
    frozen = 2 * m.vocab_size * h  # the target's embeddings, bf16
    return trained * TRAIN_BYTES_PER_PARAMETER + frozen + TRAIN_ACTIVATION_BYTES


def serve_bytes_per_gpu(inputs: GpuBudgetInputs) -> int:
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    return math.ceil(weights_bytes(inputs) / shards * (1 + WORKSPACE_SHARE))


def phase_impact(inputs: GpuBudgetInputs, phase: str) -> ProductionImpact:
    """The production impact of one phase (GPU_PHASES, or "data")."""
    hours = inputs.phase_hours.get(phase)
    if phase == "data":
        return ProductionImpact(
            action="reuse", downtime_hours=0.0, gpus=[g.index for g in inputs.gpus if g.production], memory_bytes=0,
            reason="generation sends its requests to the production server itself",
        )  # fmt: skip
    if not inputs.gpus:
        memory = train_bytes(inputs) if phase == "train" else serve_bytes_per_gpu(inputs)
        return ProductionImpact(
            action="keep", downtime_hours=0.0, gpus=[], memory_bytes=memory,
            reason="no GPU on the host: the phase runs on CPU beside production (memory is host RAM)",
        )  # fmt: skip
    if phase == "train":
        return _fit(inputs, phase, hours, per_gpu=train_bytes(inputs), count=1)
    layout = inputs.production
    return _fit(inputs, phase, hours, per_gpu=serve_bytes_per_gpu(inputs),
                count=layout.tensor_parallel_size * layout.pipeline_parallel_size)  # fmt: skip


def _fit(inputs: GpuBudgetInputs, phase: str, hours: float | None, *, per_gpu: int, count: int) -> ProductionImpact:
    """Keep production when `count` GPUs each have `per_gpu` free now; else stop it and use its GPUs."""
    roomy = sorted((g for g in inputs.gpus if g.memory_free_mib * MIB >= per_gpu), key=lambda g: -g.memory_free_mib)
    need = f"{count} GPU(s) x {per_gpu / 1e9:.1f} GB"
    if len(roomy) >= count:
        chosen = sorted(g.index for g in roomy[:count])
        return ProductionImpact(
            action="keep", downtime_hours=0.0, gpus=chosen, memory_bytes=per_gpu * count,
            reason=f"{phase} needs {need}; GPUs {chosen} have that free beside production",
        )  # fmt: skip
    held = [g.index for g in inputs.gpus if g.production] or [g.index for g in inputs.gpus]
    if count > len(inputs.gpus) or per_gpu > min(g.memory_total_mib for g in inputs.gpus) * MIB:
        reason = f"{phase} needs {need}, more than the host's {len(inputs.gpus)} GPU(s) hold even without production"
    else:
        free = max(g.memory_free_mib for g in inputs.gpus) * MIB / 1e9
        reason = f"{phase} needs {need}; the most any GPU has free beside production is {free:.1f} GB"
    layout = inputs.production
    load_h = layout.load_s / 3600
    downtime = None if hours is None else hours + load_h
    reason += f"; production stops for the phase plus {layout.load_s / 60:.0f} min to load again ({layout.load_source})"
    return ProductionImpact(
        action="stop", downtime_hours=downtime, gpus=held[: max(count, len(held))], memory_bytes=per_gpu * count,
        reason=reason,
    )  # fmt: skip


def budget(inputs: GpuBudgetInputs) -> dict[str, ProductionImpact]:
    """Every phase's production impact: the data phase and each GPU phase."""
    return {phase: phase_impact(inputs, phase) for phase in ("data", *GPU_PHASES)}
