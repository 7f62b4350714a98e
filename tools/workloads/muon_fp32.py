"""torch's Muon with its Newton-Schulz iterations in float32, for CPUs without native bf16.

`torch.optim.Muon` (torch 2.13) orthogonalizes every update in bfloat16 and offers no hook to change that.
On a CPU without AVX512-BF16 or AMX those matmuls are emulated: a training step spent over 90% of its time
there (DESIGN.md, "Muon on CPU"). `Float32Muon` redoes only `step`, with the same update (momentum,
Nesterov, decoupled weight decay, learning-rate adjustment) and the same state (`momentum_buffer`), so a
checkpoint of either loads into the other. Needs torch; imported by train_loop.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch


def newton_schulz(
    update: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> torch.Tensor:
    """The quintic Newton-Schulz orthogonalization torch's Muon applies, computed in float32."""
    a, b, c = coefficients
    tall = update.size(0) > update.size(1)
    ortho = update.float().T if tall else update.float()
    ortho = ortho / ortho.norm().clamp(min=eps)  # spectral norm at most 1
    for _ in range(steps):
        gram = ortho @ ortho.T
        ortho = torch.addmm(ortho, torch.addmm(gram, gram, gram, beta=b, alpha=c), ortho, beta=a)
    return ortho.T if tall else ortho


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """The learning rate scaled for a matrix's shape, as torch's Muon scales it."""
    rows, cols = shape[:2]
    if adjust_lr_fn == "match_rms_adamw":
        return lr * (0.2 * math.sqrt(max(rows, cols)))
    if adjust_lr_fn in (None, "original"):
        return lr * math.sqrt(max(1, rows / cols))
    return lr


class Float32Muon(torch.optim.Muon):
    """torch.optim.Muon, orthogonalizing in float32 instead of bfloat16."""

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params: list[torch.Tensor] = []
            grads: list[torch.Tensor] = []
            buffers: list[torch.Tensor] = []
            self._init_group(group, params, grads, buffers)
            lr, momentum = float(group["lr"]), group["momentum"]
            for param, grad, buffer in zip(params, grads, buffers, strict=True):
                buffer.lerp_(grad, 1 - momentum)
                update = grad.lerp(buffer, momentum) if group["nesterov"] else buffer
                update = newton_schulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
                param.mul_(1 - lr * group["weight_decay"])
                param.add_(update, alpha=-adjusted_lr(lr, group["adjust_lr_fn"], param.shape))
        return loss


def with_float32_newton_schulz(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """A fresh Float32Muon over the same parameter groups in place of a (not yet stepped) torch Muon."""
    if type(optimizer) is not torch.optim.Muon:
        return optimizer
    if optimizer.state:
        raise ValueError("replace torch's Muon before its first step: its state would be lost")
    return Float32Muon([dict(group) for group in optimizer.param_groups], **optimizer.defaults)
