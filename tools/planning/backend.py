"""Which extraction backend a run uses, and why, in one sentence with the numbers it was decided on.

`vllm` serves the target with production's parallel layout and captures the states as vLLM computes them: the
only way for a model that does not fit one GPU (transformers' device_map="auto" is the wrong tool for a 540 GB
MoE), and the fast way where the host's vLLM has the method and GPUs are free beside production. `hf` runs a
transformers forward pass and needs no server: the choice everywhere else, a CPU host included. The run size
`extraction_backend` overrides the choice; the gate then says what the plan would have chosen.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from eyas.tools.planning.gpu_budget import MIB, WORKSPACE_SHARE, GpuBudgetInputs, ProductionImpact, weights_bytes

Backend = Literal["hf", "vllm"]


class BackendChoice(BaseModel):
    """plan["extraction"]: the backend extraction runs with, what the run asked for, and why."""

    backend: Backend
    requested: str  # the run size: auto, hf or vllm
    reason: str


def _gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB" if value < 1e12 else f"{value / 1e12:.2f} TB"


def planned_backend(inputs: GpuBudgetInputs, extract: ProductionImpact, vllm_works: bool | None) -> BackendChoice:
    """The plan's own choice (see the module's rules). `extract` is the extract phase's production impact;
    `vllm_works` what the compat check found for the vllm path (None: not known)."""
    layout = inputs.production
    shards = layout.tensor_parallel_size * layout.pipeline_parallel_size
    whole = weights_bytes(inputs) * (1 + WORKSPACE_SHARE)
    if not inputs.gpus:
        return BackendChoice(
            backend="hf", requested="auto",
            reason=f"hf: the host has no GPU, so transformers runs the {_gb(weights_bytes(inputs))} model on the "
            "CPU with no server to start",
        )  # fmt: skip
    largest = max(gpu.memory_total_mib for gpu in inputs.gpus) * MIB
    if whole > largest:
        return BackendChoice(
            backend="vllm", requested="auto",
            reason=f"vllm: the model needs {_gb(whole)} with its workspace, more than the largest GPU's "
            f"{_gb(largest)}, so it is served with production's layout (tensor {layout.tensor_parallel_size} x "
            f"pipeline {layout.pipeline_parallel_size} = {shards} GPU(s))",
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
        reason=f"vllm: {fits}, this host's vLLM has extract_hidden_states, and GPUs {extract.gpus} have the "
        f"{_gb(extract.memory_bytes)} it needs free beside production",
    )  # fmt: skip


def choose_backend(
    requested: str, inputs: GpuBudgetInputs, extract: ProductionImpact, vllm_works: bool | None
) -> BackendChoice:
    """The run's backend: the size's when it names one (the reason says what the plan would have chosen), else
    the plan's."""
    planned = planned_backend(inputs, extract, vllm_works)
    if requested == "auto":
        return planned
    return BackendChoice(
        backend="hf" if requested == "hf" else "vllm", requested=requested,
        reason=f"{requested}: the run's size extraction_backend asks for it (the plan would choose {planned.reason})",
    )  # fmt: skip
