"""GPU time and memory per phase, and what each phase means for the production server on the same GPUs.

Pure functions over pydantic inputs (the verified GPUs, the model's size, the phase hours), so a plan for a
host that cannot be reached works the same as one measured live. The rules:

- extract and evaluate serve the target model with production's own parallel layout: the weights split over
  production's tensor x pipeline size, plus the KV cache and activations that vLLM's gpu-memory-utilization
  leaves room for (WORKSPACE_SHARE on top of the weights); never more than production itself holds on each of its
  GPUs where the gpus check saw it serving, nor more than its --gpu-memory-utilization claims of a GPU: a server
  launched as production is fits where production fits.
- train holds the EAGLE-3 drafter on one GPU with AdamW: bf16 weights and grads plus fp32 master weights and
  two moments per trained parameter, the target's frozen embeddings, and hidden-state batches.
- a phase fits beside production when every GPU it needs has that much free now: action "keep". Otherwise
  production must stop ("stop"), for the phase's hours plus the time production takes to load again.
- the data phase sends its requests to production itself: "reuse", no downtime.
- without a GPU the phases run on CPU beside production: "keep".
- online and hybrid hidden states (tools/planning/hidden_states_mode.py): the train phase runs an extraction server
  with production's layout (weights / tensor x pipeline plus the workspace, on that many GPUs) beside the trainer's
  one GPU, the trainer on a GPU of its own where one has room, else on one of the server's. vLLM claims
  --gpu-memory-utilization x a GPU's memory on each of its GPUs: production's value (vLLM's 0.9 when it sets none)
  unless the trainer, or production beside them, needs the server to claim less, and then the plan lowers it for
  the extraction server alone (as far as the server's own share allows). Production is kept when both fit in the
  memory free beside it; else it stops for the train phase (training and its online prefill) plus its load. The
  extract phase of an online run (K = 0) only tokenizes: no GPU, production kept.

Each phase's answer is `plan["phases"][phase]["production"]` in the run's state: the pipeline stops
production around a phase whose action is "stop", and the gates and the dry run show it.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.settings.sizes import DEFAULT_SIZES

MIB = 1024**2
GPU_PHASES = ("extract", "train", "evaluate")
WORKSPACE_SHARE = 0.25  # KV cache, activations and CUDA graphs on top of a served model's weights
TRAIN_BYTES_PER_PARAMETER = 2 + 2 + 12  # bf16 weights + bf16 grads + fp32 master copy and two AdamW moments
TRAIN_ACTIVATION_BYTES = 4 * 1024**3  # hidden-state batches and activations of one drafter layer
LOAD_BYTES_PER_S = 0.4e9  # the motivating host: 540 GB loaded in about 22 minutes
VLLM_MEMORY_UTILIZATION = 0.9  # vLLM's own default --gpu-memory-utilization
DEFAULT_BYTES_PER_PARAMETER = 2  # bf16 weights, when nothing measured the model's files


def gpu_phrase(gpus: list[int]) -> str:
    """GPU indices as a person reads them: "no GPU" (a CPU phase), "GPU 3", "GPUs 0-7", "GPUs 0, 2, 5"."""
    if not gpus:
        return "no GPU"
    ordered = sorted(gpus)
    if len(ordered) == 1:
        return f"GPU {ordered[0]}"
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"GPUs {ordered[0]}-{ordered[-1]}"
    return "GPUs " + ", ".join(map(str, ordered))


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
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="production's flag; None: vLLM's")


class GpuBudgetInputs(BaseModel):
    model: ModelDims
    model_bytes: int | None = Field(None, gt=0, description="the weights' files; default: estimated from the dims")
    gpus: list[GpuFree] = Field(default_factory=list)
    production: ProductionLayout
    phase_hours: dict[str, float | None] = Field(default_factory=dict)
    draft_vocab_size: int = Field(DEFAULT_SIZES.draft_vocab_size, gt=0)
    online: bool = Field(False, description="the train phase runs an extraction server beside the trainer")
    tokenize_only: bool = Field(False, description="the extract phase only tokenizes (online: K = 0)")


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
    """A server with production's layout, per GPU: the weights' share and the workspace, at most what production
    holds on each of its GPUs now (measured: it runs the same launch there) or what its launch's
    --gpu-memory-utilization claims of a GPU (vLLM takes that share up front, and production fits in it)."""
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    found = [math.ceil(weights_bytes(inputs) / shards * (1 + WORKSPACE_SHARE))]
    held = [(g.memory_total_mib - g.memory_free_mib) * MIB for g in inputs.gpus if g.production]
    if len(held) >= shards:
        found.append(max(held))
    if layout.gpu_memory_utilization is not None and inputs.gpus:  # what its launch claims of each GPU
        found.append(math.floor(layout.gpu_memory_utilization * min(g.memory_total_mib for g in inputs.gpus) * MIB))
    return min(found)


def phase_impact(inputs: GpuBudgetInputs, phase: str) -> ProductionImpact:
    """The production impact of one phase (GPU_PHASES, or "data")."""
    hours = inputs.phase_hours.get(phase)
    if phase == "data":
        return ProductionImpact(
            action="reuse", downtime_hours=0.0, gpus=[g.index for g in inputs.gpus if g.production], memory_bytes=0,
            reason="generation sends its requests to the production server itself",
        )  # fmt: skip
    if phase == "extract" and inputs.tokenize_only:
        return ProductionImpact(
            action="keep", downtime_hours=0.0, gpus=[], memory_bytes=0,
            reason="online: extraction only tokenizes the samples (no server, no model weights), so production keeps "
            "every GPU",
        )  # fmt: skip
    if phase == "train" and inputs.online:
        return online_train_fit(inputs).impact
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
            reason=f"{phase} needs {need}; {gpu_phrase(chosen)} have that free beside production",
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


class OnlineTrainFit(BaseModel):
    """The train phase of an online or hybrid run: its production impact, and the extraction server's
    --gpu-memory-utilization where production's must be lowered for the server and the trainer to fit."""

    impact: ProductionImpact
    memory_utilization: float | None = None


class _Placement(BaseModel):
    server_gpus: list[int]
    trainer_gpu: int
    share: float  # the most --gpu-memory-utilization the server may claim, rounded down to 0.01


def _place(gpus: list[GpuFree], room: dict[int, int], shards: int, server: int, trainer: int) -> _Placement | None:
    """Where the extraction server (`shards` GPUs, `server` bytes each) and the trainer (`trainer` bytes on one GPU)
    fit in `room` bytes per GPU; None when they do not. The trainer takes a GPU of its own where one has room."""
    if shards > len(gpus):
        return None
    ordered = sorted(gpus, key=lambda gpu: (-room[gpu.index], gpu.index))
    chosen, others = ordered[:shards], [gpu for gpu in ordered[shards:] if room[gpu.index] >= trainer]
    total = {gpu.index: gpu.memory_total_mib * MIB for gpu in gpus}
    beside = others[0] if others else chosen[0]
    shared = 0 if others else trainer
    share = min((room[gpu.index] - (shared if gpu is beside else 0)) / total[gpu.index] for gpu in chosen)
    share = math.floor(share * 100) / 100
    if share <= 0 or share * min(total[gpu.index] for gpu in chosen) < server:
        return None
    return _Placement(server_gpus=sorted(gpu.index for gpu in chosen), trainer_gpu=beside.index, share=share)


def online_train_fit(inputs: GpuBudgetInputs) -> OnlineTrainFit:
    """The train phase with its extraction server (see the module's rules)."""
    hours = inputs.phase_hours.get("train")
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    server, trainer = serve_bytes_per_gpu(inputs), train_bytes(inputs)
    if not inputs.gpus:
        return OnlineTrainFit(impact=ProductionImpact(
            action="keep", downtime_hours=0.0, gpus=[], memory_bytes=trainer + server * shards,
            reason="no GPU on the host: the trainer and its extraction server run on CPU beside production (memory "
            "is host RAM)",
        ))  # fmt: skip
    need = (
        f"train (online) runs an extraction server with production's layout ({shards} GPU(s) x "
        f"{server / 1e9:.1f} GB) beside the trainer ({trainer / 1e9:.1f} GB on one GPU)"
    )
    claimed = layout.gpu_memory_utilization or VLLM_MEMORY_UTILIZATION
    memory = server * shards + trainer

    def lowered(place: _Placement) -> tuple[float | None, str]:
        if claimed <= place.share:
            return None, ""
        return place.share, (
            f"; the extraction server runs at --gpu-memory-utilization {place.share:.2f}, as production's "
            f"{claimed:.2f} would leave no room for the trainer on GPU {place.trainer_gpu}"
            if place.trainer_gpu in place.server_gpus
            else f"; the extraction server runs at --gpu-memory-utilization {place.share:.2f}, as production's "
            f"{claimed:.2f} would claim more than is free"
        )

    free = {gpu.index: gpu.memory_free_mib * MIB for gpu in inputs.gpus}
    beside = _place(inputs.gpus, free, shards, server, trainer)
    if beside is not None:
        share, said = lowered(beside)
        used = sorted({*beside.server_gpus, beside.trainer_gpu})
        reason = (
            f"{need}: {gpu_phrase(beside.server_gpus)} hold the server and GPU {beside.trainer_gpu} the trainer, free "
            f"beside production{said}"
        )
        impact = ProductionImpact(action="keep", downtime_hours=0.0, gpus=used, memory_bytes=memory, reason=reason)
        return OnlineTrainFit(impact=impact, memory_utilization=share)
    whole = {gpu.index: gpu.memory_total_mib * MIB for gpu in inputs.gpus}
    alone = _place(inputs.gpus, whole, shards, server, trainer)
    downtime = None if hours is None else hours + layout.load_s / 3600
    stops = (
        f"production stops for the training and its online prefill plus {layout.load_s / 60:.0f} min to load again "
        f"({layout.load_source})"
    )
    held = [g.index for g in inputs.gpus if g.production] or [g.index for g in inputs.gpus]
    if alone is None:
        reason = f"{need}, more than the host's {len(inputs.gpus)} GPU(s) hold even without production; {stops}"
        impact = ProductionImpact(action="stop", downtime_hours=downtime, gpus=held, memory_bytes=memory,
                                  reason=reason)  # fmt: skip
        return OnlineTrainFit(impact=impact)
    share, said = lowered(alone)
    most = max(free.values()) / 1e9
    reason = f"{need}; the most any GPU has free beside production is {most:.1f} GB, so {stops}{said}"
    used = sorted({*held, *alone.server_gpus, alone.trainer_gpu})
    impact = ProductionImpact(action="stop", downtime_hours=downtime, gpus=used, memory_bytes=memory, reason=reason)
    return OnlineTrainFit(impact=impact, memory_utilization=share)


def online_unplaceable(inputs: GpuBudgetInputs) -> str | None:
    """Why no GPU of the host can hold online training's extraction server beside its trainer, even with production
    stopped and the server's memory share lowered as far as its weights allow; None when they fit (or on a CPU
    host, where both run in RAM). A hybrid or online mode with this answer cannot run here at all."""
    if not inputs.gpus:
        return None
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    server, trainer = serve_bytes_per_gpu(inputs), train_bytes(inputs)
    whole = {gpu.index: gpu.memory_total_mib * MIB for gpu in inputs.gpus}
    if _place(inputs.gpus, whole, shards, server, trainer) is not None:
        return None
    largest = max(whole.values())
    bare = math.ceil(weights_bytes(inputs) / shards)
    share = (
        f"; no lower --gpu-memory-utilization makes room: the weights alone take {bare / 1e9:.1f} GB of each, "
        f"{(bare + trainer) / 1e9:.1f} GB with the trainer"
        if bare + trainer > largest
        else ""
    )
    return (
        f"the GPUs cannot hold online training even with production stopped: its extraction server takes "
        f"production's layout ({shards} GPU(s) x {server / 1e9:.1f} GB) and the trainer {trainer / 1e9:.1f} GB more "
        f"on one GPU, {(server + trainer) / 1e9:.1f} GB where the largest of the host's {len(inputs.gpus)} GPU(s) "
        f"holds {largest / 1e9:.1f} GB{share}"
    )


def budget(inputs: GpuBudgetInputs) -> dict[str, ProductionImpact]:
    """Every phase's production impact: the data phase and each GPU phase."""
    return {phase: phase_impact(inputs, phase) for phase in ("data", *GPU_PHASES)}
