"""speculators' own Trainer on a CPU: the smallest patches that let it run where torch has no accelerator.

speculators 0.9 assumes an accelerator in four places; each patch below replaces exactly one of them, names the
upstream line it stands in for, and goes when upstream handles a CPU there. Nothing else of the Trainer, its CLI, its
data loading, DDP, schedule or checkpoints is touched, so a CPU host runs the code a GPU host runs.

The defaults need four flags on a CPU as well (`CPU_FLAGS`): flex attention has no CPU backward, the fused loss is a
triton kernel, bf16 hidden states would be autocast targets a CPU does not autocast to, and the DataLoader's spawned
workers would each re-import torch on cores the step needs.

`apply()` patches the modules in place (train_cuda.py's rank entry calls it when torch sees no accelerator).
"""

from __future__ import annotations

import os
import time
from typing import Any

CPU_FLAGS = (
    "--draft-attn-impl", "sdpa", "--loss-implementation", "eager", "--hidden-states-dtype", "float32",
    "--num-workers", "0",
)  # fmt: skip


def needed() -> bool:
    """True where torch has no accelerator: there the Trainer cannot run unpatched."""
    import torch

    return torch.accelerator.current_accelerator() is None


def setup_distributed_gloo(sp_size: int = 1) -> None:
    """Stands in for speculators/train/distributed.py maybe_setup_distributed (lines 151-156): it sets an accelerator
    device and passes `device_id` to init_process_group. Here the group is gloo's, with no device; the topology state
    is set as upstream sets it. Goes when upstream skips the device where torch.accelerator has none."""
    import torch.distributed as dist
    from speculators.train import distributed

    distributed._local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    distributed._is_distributed = "LOCAL_RANK" in os.environ
    if not distributed._is_distributed:
        return
    dist.init_process_group("gloo")
    distributed._rank = dist.get_rank()
    distributed._world_size = dist.get_world_size()
    distributed._init_sp_process_groups(distributed._rank, distributed._world_size, sp_size)


def cpu_as_local_device() -> Any:
    """Stands in for speculators/train/trainer.py Trainer.__init__ (line 221, `self.local_rank = get_local_rank()`),
    whose rank is then the device of `model.to` and `batch.to` (lines 348, 383, 533, 643), an accelerator index. Here
    the Trainer's "local rank" is the CPU. Goes when upstream moves to a device rather than a rank."""
    import torch

    return torch.device("cpu")


def unsynchronized_timer() -> type:
    """Stands in for speculators/train/trainer.py _StepTimer.mark and .now (lines 80 and 92), which call
    torch.accelerator.synchronize(), an error without an accelerator. On a CPU every op has finished when it returns,
    so the timer reads the clock alone. Goes when upstream synchronizes only where an accelerator is."""
    from speculators.train.trainer import _StepTimer

    class CpuStepTimer(_StepTimer):
        def mark(self, name: str) -> None:
            if self.enabled:
                self._marks[name] = time.perf_counter()

        def now(self) -> float | None:
            return time.perf_counter() if self.enabled else None

    return CpuStepTimer


def cpu_for_resume() -> str:
    """Stands in for speculators/utils/util.py get_current_device (line 17, `return "cuda:0"` without an accelerator),
    where the checkpointer loads a checkpoint's weights and optimizer state to resume. Goes when upstream returns
    "cpu" there."""
    return "cpu"


def apply() -> None:
    """Patch speculators' training modules in place (idempotent)."""
    from speculators.train import checkpointer, cli, distributed, trainer

    distributed.maybe_setup_distributed = setup_distributed_gloo
    cli.maybe_setup_distributed = setup_distributed_gloo  # cli.py imports the name
    trainer.get_local_rank = cpu_as_local_device
    if trainer._StepTimer.__name__ != "CpuStepTimer":
        trainer._StepTimer = unsynchronized_timer()  # type: ignore[misc]
    checkpointer.get_current_device = cpu_for_resume
