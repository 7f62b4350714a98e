"""Data parallelism for train.py's CPU loop over several processes or nodes, with PyTorch distributed (gloo).

Every rank builds the same drafter from the same seed, steps on its own share of each epoch's packed batches
(speculators' distributed sampler), and averages its gradients with the others' before the optimizer step, so
every rank holds the same weights after every step. Rank 0 alone validates, checkpoints, reports and saves.
With one node nothing here touches torch.distributed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from rendezvous import find, publish


@dataclass(frozen=True)
class World:
    """This process's rank among `size` training processes (rank 0 of 1 when training alone)."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def average_gradients(self, model: torch.nn.Module) -> None:
        """Replace each trainable parameter's gradient by its mean over the ranks (one all-reduce)."""
        if self.size == 1:
            return
        import torch.distributed as dist

        params = [param for param in model.parameters() if param.requires_grad]
        grads = [param.grad if param.grad is not None else torch.zeros_like(param) for param in params]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        dist.all_reduce(flat)
        flat /= self.size
        offset = 0
        for param in params:
            count = param.numel()
            param.grad = flat[offset : offset + count].view_as(param).clone()
            offset += count

    def sum_values(self, values: dict[str, Any]) -> dict[str, float]:
        """Numbers (or one-element tensors) summed over the ranks, key by key."""
        keys = sorted(values)
        if self.size == 1:
            return {key: float(values[key]) for key in keys}
        import torch.distributed as dist

        flat = torch.tensor([float(values[key]) for key in keys], dtype=torch.float64)
        dist.all_reduce(flat)
        return dict(zip(keys, flat.tolist(), strict=True))

    def smallest(self, counts: list[int]) -> list[int]:
        """Each count's minimum over the ranks: the steps every rank can take together."""
        if self.size == 1:
            return counts
        import torch.distributed as dist

        flat = torch.tensor(counts, dtype=torch.int64)
        dist.all_reduce(flat, op=dist.ReduceOp.MIN)
        return [int(value) for value in flat.tolist()]

    def agree(self, value: int, what: str) -> None:
        """Stop unless every rank has the same `value` (say, the step a checkpoint resumed them at)."""
        if self.size == 1:
            return
        low, negated_high = self.smallest([value, -value])  # both ends in one all-reduce
        high = -negated_high
        if low != high:
            raise SystemExit(f"train.py: the training processes disagree on {what} ({low} to {high}); rerun them all.")

    def leave(self) -> None:
        """Leave the process group (the last step of a rank that trained with others)."""
        if self.size > 1:
            import torch.distributed as dist

            dist.destroy_process_group()


def join(nodes: int, rank: int, rendezvous: Path, timeout_s: float) -> World:
    """Meet the other ranks (rank 0 publishes where, the others find it) and form the gloo process group; a
    collective that waits longer than `timeout_s` for a rank (one that died with its node) fails."""
    if nodes == 1:
        return World()
    import torch.distributed as dist

    address, port = publish(rendezvous) if rank == 0 else find(rendezvous, timeout_s)
    dist.init_process_group(
        "gloo", init_method=f"tcp://{address}:{port}", rank=rank, world_size=nodes, timeout=timedelta(seconds=timeout_s)
    )
    return World(rank=rank, size=nodes)


ALONE = World()  # one process: every method is a no-op
