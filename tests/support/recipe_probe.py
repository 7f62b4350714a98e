"""Test helper run by the target venv's Python: a new drafter as train.py's CPU loop builds it, measured against the
target's own weights (read from its safetensors here, not through speculators), before and after one optimizer step.

    python recipe_probe.py --verifier TARGET_DIR --work DIR

The data is train_probe.py's seeded noise (SmolLM2's hidden size and layers), the draft vocabulary its most frequent
loss-masked tokens (vocab.py's own functions). Prints one JSON object:

- frozen: the drafter's parameters that take no gradient
- from_target: the largest difference of embed_tokens, lm_head, verifier_lm_head (the target's head, its rows for the
  draft vocabulary), verifier_norm and norm (the target's final norm) to the target's tensors
- moved, still: the parameters one AdamW step at a real learning rate changed, and those it left as they were
- loss: the drafter's training loss on one packed batch at one TTT step
- kl, kl_unmasked, hard_ce: computed here from the drafter's logits (caught at its lm_head) and the target's own
  next-token distribution (the target's final norm and head over the last layer's states, in the draft vocabulary):
  the KL divergence averaged over the loss-masked positions, the same over every real position, and the cross
  entropy to the target's argmax token over the masked positions
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))

from safetensors import safe_open

from drafter_data import PackedBatches, stage
from drafter_recipe import Recipe
from train import parse_args
from train_loop import build_cpu_optimizers, build_drafter, loss_kwargs, train_step
from train_probe import synthetic
from vocab import count, mappings, masked_tokens_from_files, select

DRAFT_VOCAB = 256
ONE_STEP = loss_kwargs(ttt_steps=1)


def target_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    """The target's embeddings, head (its embeddings when tied) and final norm, in float32."""
    found: dict[str, torch.Tensor] = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
                if name in handle.keys():  # noqa: SIM118 (safe_open has no __contains__)
                    found[name] = handle.get_tensor(name).float()
    found.setdefault("lm_head.weight", found["model.embed_tokens.weight"])
    return found


def draft_vocabulary(data: Path, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    counts, _ = count(masked_tokens_from_files(data), vocab_size)
    selected, _, _ = select(counts, DRAFT_VOCAB)
    d2t, t2d = mappings(selected, vocab_size)
    return torch.from_numpy(d2t), torch.from_numpy(t2d)


def difference(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float((ours.detach().float() - theirs).abs().max())


def losses_here(
    logits: torch.Tensor, batch: dict[str, Any], target: dict[str, torch.Tensor], t2d: torch.Tensor, eps: float
) -> dict[str, float]:
    """KL to the target's distribution (masked and over every real position) and hard-label cross entropy."""
    last = batch["verifier_last_hidden_states"][0].float()
    normed = last * torch.rsqrt(last.pow(2).mean(-1, keepdim=True) + eps) * target["model.norm.weight"]
    target_logits = normed @ target["lm_head.weight"][t2d].T
    log_p = torch.log_softmax(target_logits, dim=-1)
    log_q = torch.log_softmax(logits[0].float(), dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    ce = -log_q.gather(-1, target_logits.argmax(-1, keepdim=True))[:, 0]
    masked, real = batch["loss_mask"][0].bool(), batch["document_ids"][0] != -1
    return {
        "kl": float(kl[masked].mean()),
        "kl_unmasked": float(kl[real].mean()),
        "hard_ce": float(ce[masked].mean()),
        "masked": int(masked.sum()),
        "real": int(real.sum()),
    }


def audit(verifier: Path, work: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    synthetic(work / "hs", samples=12, pattern="random", seed=0)
    config = json.loads((verifier / "config.json").read_text())
    d2t, t2d = draft_vocabulary(work / "hs", config["vocab_size"])
    args = parse_args(["--data", str(work / "hs"), "--verifier", str(verifier), "--out", str(work / "out")])
    staged = stage(args.data, work / "staged")
    args.target_layer_ids = staged.aux_layer_ids  # as train.py's main takes them from the files
    model = build_drafter(args, staged, None, d2t, t2d, Recipe.from_args(args))
    target = target_tensors(verifier)
    batches = PackedBatches(staged, split="train", train_ratio=1.0, total_seq_len=256, seed=0)
    batch = batches.batch(batches.epoch(0)[0])

    from_target = {
        "embed_tokens": difference(model.embed_tokens.weight, target["model.embed_tokens.weight"]),
        "lm_head": difference(model.lm_head.weight, target["lm_head.weight"][t2d]),
        "verifier_lm_head": difference(model.verifier_lm_head.weight, target["lm_head.weight"][t2d]),
        "verifier_norm": difference(model.verifier_norm.weight, target["model.norm.weight"]),
        "norm": difference(model.norm.weight, target["model.norm.weight"]),
    }
    caught: list[torch.Tensor] = []
    hook = model.lm_head.register_forward_hook(lambda _module, _inputs, output: caught.append(output))
    with torch.no_grad():
        _, loss, _ = model(**batch, **ONE_STEP)
    hook.remove()
    here = losses_here(caught[0], batch, target, t2d, config["rms_norm_eps"])

    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    optimizers = build_cpu_optimizers(model, "adamw", 1e-3, "float32")
    schedulers = [torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0) for optimizer in optimizers]
    model.train()
    train_step(model, batch, loss_kwargs(args.ttt_steps), optimizers, schedulers)
    moved = sorted(name for name, param in model.named_parameters() if not torch.equal(param, before[name]))
    return {
        "frozen": sorted(name for name, param in model.named_parameters() if not param.requires_grad),
        "from_target": from_target,
        "moved": moved,
        "still": sorted(set(before) - set(moved)),
        "loss": float(loss),
        **here,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verifier", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(audit(args.verifier, args.work)))


if __name__ == "__main__":
    main()
