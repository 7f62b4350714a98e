"""The choices of a new drafter's recipe that speculators leaves open, in one place for both training paths.

The CPU loop (train_loop.py) builds the drafter itself; the CUDA path hands speculators' trainer the same
choices as flags (`speculators_flags`) and, for the output norm, patches the drafter as the trainer builds it
(`patch_speculators_builder`), so that both paths still train the same drafter.

- aux_norm: how the captured layers are normalised before the fc projection. `shared` is speculators' eagle3
  default (one RMSNorm over the concatenation, norm_before_fc); `per-layer` is its --fc-norm (EAGLE 3.1), one
  RMSNorm per layer. The captured layers differ in scale by an order of magnitude (SmolLM2's layers 2, 15 and 27
  have RMS 2.75, 6.2 and 23.2), so one shared norm leaves the last layer 92% of the energy and the low layers
  next to nothing. vLLM loads both (its eagle3 llama reads `fc_norm` from the config).
- output_norm_init: the drafter's final norm starts as `ones` (speculators) or as the `target`'s own final norm.
  The drafter's logits come from the target's frozen LM head, which was trained on hidden states scaled by that
  norm (SmolLM2's averages 1.83); from ones, a short run's logits stay about half as sharp as the target's.
- warmup_ratio, warmup_min_steps: the learning rate warms up over a share of the steps, but over at least a floor
  of them (`warmup_steps`). speculators' 1% is a single step (or none) in a run of a few hundred steps, and the loss
  of such a run jumped from 10.5 to 20.2 at its third step; 5% alone still gave the ceiling test's 108-step run five.
  Measured on that run's data (40 counting answers, lr 3e-3, seeds 0 and 1), validation accuracy per position after
  warming up over 5 steps: 0.85/0.72/0.60 and 0.72/0.47/0.29; over 10: 0.90/0.81/0.73 and 0.87/0.70/0.55; over 20:
  0.82/0.42/0.23 and 0.91/0.58/0.36. Hence a floor of 10: served by vLLM on the 8 held-out counting prompts at k=3,
  it raised acceptance from 2.74 [2.14, 3.28] to 2.85 [2.28, 3.43] (seed 0) and from 2.31 [1.99, 2.69] to 2.58 [2.16,
  3.00] (seed 1).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

AUX_NORMS = ("per-layer", "shared")
OUTPUT_NORM_INITS = ("target", "ones")
DEFAULT_AUX_NORM = "per-layer"
DEFAULT_OUTPUT_NORM_INIT = "target"
DEFAULT_WARMUP_RATIO = 0.05
DEFAULT_WARMUP_MIN_STEPS = 10
OUTPUT_NORM_ENV = "EYAS_OUTPUT_NORM_INIT"  # the CUDA ranks' copy of --output-norm-init


@dataclass(frozen=True)
class Recipe:
    """A new drafter's recipe: what train.py's flags chose, or the defaults for a caller without them (the speed
    probe, the benches), so that no caller builds a drafter with a field it forgot."""

    aux_norm: str = DEFAULT_AUX_NORM
    output_norm_init: str = DEFAULT_OUTPUT_NORM_INIT
    warmup_ratio: float = DEFAULT_WARMUP_RATIO
    warmup_min_steps: int = DEFAULT_WARMUP_MIN_STEPS

    @classmethod
    def from_args(cls, args: Any) -> Recipe:
        return cls(args.aux_norm, args.output_norm_init, args.warmup_ratio, args.warmup_min_steps)

    def warmup_steps(self, total_steps: int) -> int:
        """The steps of a `total_steps` run that warm the learning rate up: its share, or the floor where that is
        more, though the floor never takes more than a quarter of the run (a run that only warms up never decays)."""
        return max(int(total_steps * self.warmup_ratio), min(self.warmup_min_steps, total_steps // 4))


DEFAULT_RECIPE = Recipe()


def add_recipe_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--aux-norm", choices=AUX_NORMS, default=DEFAULT_AUX_NORM,
        help=f"normalise the captured layers one by one or together before the fc (default {DEFAULT_AUX_NORM})",
    )  # fmt: skip
    group.add_argument(
        "--output-norm-init", choices=OUTPUT_NORM_INITS, default=DEFAULT_OUTPUT_NORM_INIT,
        help=f"start the drafter's final norm from the target's or from ones (default {DEFAULT_OUTPUT_NORM_INIT})",
    )  # fmt: skip
    group.add_argument(
        "--warmup-ratio", type=float, default=DEFAULT_WARMUP_RATIO,
        help=f"share of the steps the learning rate warms up over (default {DEFAULT_WARMUP_RATIO})",
    )  # fmt: skip
    group.add_argument(
        "--warmup-min-steps", type=int, default=DEFAULT_WARMUP_MIN_STEPS,
        help=f"warm up over at least this many steps, at most a quarter of them (default {DEFAULT_WARMUP_MIN_STEPS})",
    )  # fmt: skip


def norm_kwargs(aux_norm: str) -> dict[str, bool]:
    """Eagle3DraftModel.from_training_args's norm arguments for `aux_norm` (the others as speculators' CLI)."""
    per_layer = aux_norm == "per-layer"
    return {"norm_before_residual": True, "norm_before_fc": not per_layer, "fc_norm": per_layer, "norm_output": True}


def speculators_flags(recipe: Recipe, new_drafter: bool, total_steps: int) -> list[str]:
    """The same choices as speculators' train CLI flags for a run of `total_steps` (the norms only for a new drafter:
    a finetuned one keeps its own)."""
    flags = ["--scheduler-warmup-steps", str(recipe.warmup_steps(total_steps))]
    if new_drafter and recipe.aux_norm == "per-layer":
        flags += ["--fc-norm", "--no-norm-before-fc"]
    return flags


def init_output_norm(model: Any) -> bool:
    """Copy the target's final norm (the drafter's frozen `verifier_norm`) into the drafter's own final norm;
    False, leaving ones, when the two norms are of different kinds (a gain stored as 1 + w is not a gain w)."""
    import torch

    if type(model.norm) is not type(model.verifier_norm):
        return False
    with torch.no_grad():
        model.norm.weight.copy_(model.verifier_norm.weight)
    return True


def patch_speculators_builder() -> None:
    """On a CUDA rank: make speculators' Eagle3DraftModel.from_training_args start a new drafter's final norm from
    the target's when --output-norm-init target was given (the trainer has no flag for it)."""
    import os

    from speculators.models.eagle3 import Eagle3DraftModel

    if os.environ.get(OUTPUT_NORM_ENV, DEFAULT_OUTPUT_NORM_INIT) != "target":
        return
    build = Eagle3DraftModel.from_training_args.__func__  # type: ignore[attr-defined]

    def from_training_args(cls: type, *args: Any, **kwargs: Any) -> Any:
        model = build(cls, *args, **kwargs)
        init_output_norm(model)
        return model

    Eagle3DraftModel.from_training_args = classmethod(from_training_args)  # type: ignore[method-assign,assignment]
