"""The CPU path of train.py: a plain training loop over speculators' Eagle3DraftModel.

speculators' Trainer moves the model to `cuda:<rank>`, so on a CPU host this loop does the trainer's job
with the same pieces: the drafter built as its CLI builds it (sdpa attention instead of flex attention),
the eager KL loss, speculators' optimizers and linear warmup schedule, and batches from its own dataset,
packing sampler and `shift_batch` (drafter_data.PackedBatches). One change: where this CPU would emulate
bf16 (cpu_caps), Muon runs its Newton-Schulz iterations in float32 (muon_fp32.Float32Muon).

A checkpoint (trainable weights, optimizer and scheduler state, position in the data, RNG states) is
written atomically each epoch and every --checkpoint-every steps; a rerun resumes from the newest one and
replays exactly the batches an uninterrupted run would have seen. Over several processes or nodes
(data_parallel.World) each rank steps on its share of the batches with averaged gradients, and rank 0 alone
validates, checkpoints and reports; every rank resumes from rank 0's newest checkpoint. With `online` (train.py
--online), the samples without hidden states on disk are fetched from an extraction server ahead of each step and
deleted once read (online_fetch.py); each training row of metrics.jsonl lists the staged rows it trained on.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

import progress
from cpu_caps import cpu_compute_dtype
from data_parallel import ALONE, World
from drafter_data import PackedBatches, Staged
from drafter_recipe import DEFAULT_RECIPE, Recipe, init_output_norm, norm_kwargs
from muon_fp32 import with_float32_newton_schulz
from online_fetch import OnlineHiddenStates
from training_metrics import FILE_NAME, tracked_log

KEEP_CHECKPOINTS = 2


@dataclass
class Position:
    """Where training stands: steps done, and the next batch of which epoch."""

    step: int = 0
    epoch: int = 0
    batch: int = 0


def build_drafter(
    args: Any,
    staged: Staged,
    init_drafter: Path | None,
    d2t: torch.Tensor | None,
    t2d: torch.Tensor | None,
    recipe: Recipe = DEFAULT_RECIPE,
) -> torch.nn.Module:
    """The drafter as speculators' CLI builds it for eagle3, from scratch (with `recipe`'s norms) or from a drafter
    to finetune. `args`: the shape (verifier, num_layers, target_layer_ids, ttt_steps, trust_remote_code)."""
    from speculators.models.eagle3 import Eagle3DraftModel
    from speculators.train.cli import create_transformer_layer_config

    from convert_drafter import load_for_training

    if init_drafter is not None:
        # Saved in bf16; the loop keeps fp32 master weights and batches, as speculators' trainer does. download.py
        # loads it the same way when it fetches the drafter, so a drafter that fails here fails there first.
        model = load_for_training(init_drafter, t2d=t2d, d2t=d2t).float()
    else:
        layer_config = create_transformer_layer_config(
            verifier_name_or_path=str(args.verifier),
            num_layers=args.num_layers,
            draft_arch="llama",
            hidden_act="silu",
            sliding_window=2048,
            full_attention_indices=list(range(args.num_layers)),
            trust_remote_code=getattr(args, "trust_remote_code", False),
        )
        model = Eagle3DraftModel.from_training_args(
            layer_config,
            t2d=t2d,
            d2t=d2t,
            verifier_name_or_path=str(args.verifier),
            target_layer_ids=args.target_layer_ids,
            draft_vocab_size=len(d2t) if d2t is not None else layer_config.vocab_size,
            **norm_kwargs(recipe.aux_norm),
            ttt_steps=args.ttt_steps,
            draft_attn_impl="sdpa",
            trust_remote_code=getattr(args, "trust_remote_code", False),
        )
        if recipe.output_norm_init == "target":
            init_output_norm(model)
    wanted = list(model.target_layer_ids)
    if len(wanted) != staged.num_layers - 1 or (staged.aux_layer_ids and wanted != staged.aux_layer_ids):
        raise SystemExit(
            f"The drafter reads the auxiliary layers {wanted}, but the hidden-state files hold "
            f"{staged.aux_layer_ids or staged.num_layers - 1} plus the last layer. Extract with the drafter's "
            "layers (extract.py --layers), or for a new drafter pass --target-layer-ids as extracted."
        )
    return model


def save_drafter(model: torch.nn.Module, out: Path, extras: tuple[Path, ...] = ()) -> None:
    """Write the drafter as speculators' trainer does (bf16 config.json + model.safetensors), and the `extras`
    that exist (the training metrics, the TensorBoard directory) beside it, atomically."""
    from speculators.train.checkpointer import convert_float_dtype, patch_config_dtype

    tmp = out.with_name(out.name + ".partial")
    model.save_pretrained(str(tmp), state_dict=convert_float_dtype(model.state_dict(), torch.bfloat16))
    patch_config_dtype(tmp / "config.json", torch.bfloat16)
    copy_extras(extras, tmp)
    replace_dir(tmp, out)


def copy_extras(extras: tuple[Path, ...], into: Path) -> None:
    """The files and directories of `extras` that exist, copied into `into` under their own names."""
    for extra in extras:
        if extra.is_dir():
            shutil.copytree(extra, into / extra.name)
        elif extra.exists():
            shutil.copyfile(extra, into / extra.name)


def replace_dir(tmp: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def rates(sums: dict[str, Any], ttt_steps: int) -> tuple[float, list[float]]:
    """Loss and per-position accuracy from the model's metric sums and totals (one batch's, or summed)."""
    loss = float(sums["loss_sum"]) / max(float(sums["loss_total"]), 1.0)
    acc = [float(sums[f"full_acc_{k}_sum"]) / max(float(sums[f"full_acc_{k}_total"]), 1.0) for k in range(ttt_steps)]
    return round(loss, 4), [round(value, 4) for value in acc]


class Checkpoints:
    """step-<n>.pt files in one directory; the newest complete one is the resume point."""

    def __init__(self, directory: Path, signature: dict[str, Any]) -> None:
        self.directory = directory
        self.signature = signature
        directory.mkdir(parents=True, exist_ok=True)

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("step-*.pt"))

    def save(self, model: torch.nn.Module, optimizers: list, schedulers: list, position: Position) -> Path:
        trainable = {name for name, param in model.named_parameters() if param.requires_grad}
        payload = {
            "signature": self.signature,
            "position": vars(position),
            "model": {name: value for name, value in model.state_dict().items() if name in trainable},
            "optimizers": [optimizer.state_dict() for optimizer in optimizers],
            "schedulers": [scheduler.state_dict() for scheduler in schedulers],
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        }
        path = self.directory / f"step-{position.step:08d}.pt"
        tmp = path.with_name(path.name + ".partial")
        torch.save(payload, tmp)
        os.replace(tmp, path)
        for old in self.files()[:-KEEP_CHECKPOINTS]:
            old.unlink()
        return path

    def restore(self, model: torch.nn.Module, optimizers: list, schedulers: list) -> Position | None:
        files = self.files()
        if not files:
            return None
        payload = torch.load(files[-1], weights_only=False)
        if payload["signature"] != self.signature:
            raise SystemExit(
                f"The checkpoints in {self.directory} come from a run with other settings "
                f"({payload['signature']} there, {self.signature} now). Rerun with the same data and settings to "
                "resume, or pass another --work directory (or delete that one) to start afresh."
            )
        model.load_state_dict(payload["model"], strict=False)
        for optimizer, state in zip(optimizers, payload["optimizers"], strict=True):
            optimizer.load_state_dict(state)
        for scheduler, state in zip(schedulers, payload["schedulers"], strict=True):
            scheduler.load_state_dict(state)
        torch.set_rng_state(payload["rng"]["torch"])
        np.random.set_state(payload["rng"]["numpy"])
        random.setstate(payload["rng"]["python"])
        return Position(**payload["position"])


def build_cpu_optimizers(model: torch.nn.Module, name: str, lr: float, muon_dtype: str) -> list:
    """speculators' optimizers with its CLI defaults; Muon orthogonalizes in `muon_dtype` (torch's own: bfloat16)."""
    from speculators.train.optimizers import build_optimizers

    hyper = SimpleNamespace(
        optimizer=name, lr=lr, weight_decay=0.01, muon_lr=lr, muon_momentum=0.95, muon_weight_decay=0.1,
        muon_ns_steps=5, muon_adjust_lr_fn="match_rms_adamw",
    )  # fmt: skip
    optimizers = build_optimizers(model, hyper)
    if muon_dtype == "bfloat16":
        return optimizers
    return [with_float32_newton_schulz(optimizer) for optimizer in optimizers]


def loss_kwargs(ttt_steps: int) -> dict[str, Any]:
    """The drafter's forward arguments in training, as speculators' CLI gives them: a KL divergence to the target's
    whole next-token distribution (not its argmax) at each of `ttt_steps` positions, all weighted alike; eager,
    since the fused loss kernels need a GPU."""
    from speculators.models.eagle3 import Eagle3DraftModel

    call_kwargs, _ = Eagle3DraftModel.get_trainer_kwargs(
        ttt_steps=ttt_steps, ttt_step_loss_decay=1.0, loss_fn="kl_div", loss_implementation="eager"
    )
    return call_kwargs


def train_step(
    model: torch.nn.Module,
    batch: dict[str, Any],
    call_kwargs: dict[str, Any],
    optimizers: list,
    schedulers: list,
    world: World = ALONE,
) -> dict[str, Any]:
    """One optimizer step on one batch, as speculators' trainer takes it (its gradients averaged with the other
    ranks'); returns the batch's metric sums."""
    _, loss, metrics = model(**batch, **call_kwargs)
    for optimizer in optimizers:
        optimizer.zero_grad()
    loss.backward()
    world.average_gradients(model)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    for optimizer, scheduler in zip(optimizers, schedulers, strict=True):
        optimizer.step()
        scheduler.step()
    return metrics


def batches_of(
    data: PackedBatches, order: list[list[int]], online: OnlineHiddenStates | None
) -> Generator[dict[str, Any], None, None]:
    """The batches of `order`, read from disk, or for online samples fetched first (and deleted once read)."""
    if online is None:
        return (data.batch(indices) for indices in order)
    return online.stream(order, data.batch, data.rows)


def validate(
    model: torch.nn.Module,
    batches: PackedBatches,
    call_kwargs: dict,
    ttt_steps: int,
    online: OnlineHiddenStates | None = None,
) -> dict[str, Any]:
    sums: dict[str, float] = {}
    model.eval()
    with torch.no_grad():
        for batch in batches_of(batches, batches.epoch(0), online):
            _, _, metrics = model(**batch, **call_kwargs)
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + float(value)
    model.train()
    loss, acc = rates(sums, ttt_steps)
    return {"val_loss": loss, "val_acc": acc}


def train_cpu(
    args: Any,
    staged: Staged,
    init_drafter: Path | None,
    d2t: torch.Tensor | None,
    t2d: torch.Tensor | None,
    work: Path,
    world: World = ALONE,
    online: OnlineHiddenStates | None = None,
) -> torch.nn.Module:
    """Train (or resume training) and return the trained drafter (the same on every rank)."""
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    recipe = Recipe.from_args(args)
    model = build_drafter(args, staged, init_drafter, d2t, t2d, recipe)
    model.train()
    call_kwargs = loss_kwargs(args.ttt_steps)
    split = {"train_ratio": 1 - args.val_ratio, "total_seq_len": args.total_seq_len, "seed": args.seed}
    train = PackedBatches(staged, split="train", replicas=world.size, rank=world.rank, **split)
    val = PackedBatches(staged, split="val", **split) if args.val_ratio > 0 and world.main else None
    shares = [train.epoch(epoch) for epoch in range(args.epochs)]
    # Every rank steps together: each epoch as long as the shortest rank's share of it.
    plan = [share[:steps] for share, steps in zip(shares, world.smallest(list(map(len, shares))), strict=True)]
    total = sum(map(len, plan)) if not args.max_steps else min(args.max_steps, sum(map(len, plan)))
    optimizers = build_cpu_optimizers(model, args.optimizer, args.lr, cpu_compute_dtype())
    warmup = recipe.warmup_steps(total)
    schedulers = [get_linear_schedule_with_warmup(optimizer, warmup, total) for optimizer in optimizers]
    signature = {"samples": staged.samples, "tokens": staged.tokens, "total_steps": total, **split}
    if world.size > 1:
        signature["processes"] = world.size
    checkpoints = Checkpoints(work / "checkpoints", signature)
    position = checkpoints.restore(model, optimizers, schedulers) or Position()
    world.agree(position.step, "the step their checkpoint resumes at")
    metrics_log = tracked_log(work / FILE_NAME) if world.main else None
    if metrics_log is not None:
        metrics_log.rewind(position.step)
    report = progress.emit if world.main else _quiet
    if position.step:
        report(phase="resumed", done=position.step, total=total, checkpoint=str(checkpoints.files()[-1]))
    if not world.main:
        progress.emit(phase="joined", rank=world.rank, processes=world.size, resumed_at=position.step)

    def checkpoint() -> None:
        if world.main:
            path = checkpoints.save(model, optimizers, schedulers, position)
            progress.emit(phase="checkpoint", done=position.step, total=total, path=str(path))

    while position.step < total and position.epoch < args.epochs:
        if online is not None:
            online.begin_epoch(position.epoch)
        remaining = plan[position.epoch][position.batch :]
        fetched = batches_of(train, remaining, online)
        stream = zip(remaining, fetched, strict=True)
        while True:
            started = time.monotonic()
            if (item := next(stream, None)) is None:
                break
            indices, batch = item
            waited = time.monotonic() - started  # reading the batch, or for online samples waiting on the server
            lr = schedulers[0].get_last_lr()[0]  # the rate this step uses
            metrics = train_step(model, batch, call_kwargs, optimizers, schedulers, world)
            position.step += 1
            position.batch += 1
            # The step's loss, accuracy and tokens over every rank's batch.
            sums = world.sum_values({**metrics, "tokens": int((batch["document_ids"] != -1).sum())})
            loss_value, acc = rates(sums, args.ttt_steps)
            tokens_per_s = round(sums["tokens"] / (time.monotonic() - started), 1)
            report(
                phase="train", done=position.step, total=total, epoch=position.epoch, loss=loss_value, acc=acc,
                tokens_per_s=tokens_per_s, wait_s=round(waited, 3),
            )  # fmt: skip
            if metrics_log is not None:
                metrics_log.write(
                    split="train", step=position.step, epoch=position.epoch, loss=loss_value, acc=acc,
                    lr=lr, tokens_per_s=tokens_per_s, rows=train.rows(indices),
                )  # fmt: skip
            if position.step >= total:
                break
            if args.checkpoint_every and position.step % args.checkpoint_every == 0:
                checkpoint()
        fetched.close()  # a run that stops mid-epoch (--max-steps) deletes what was fetched ahead
        if position.batch >= len(plan[position.epoch]):
            position.epoch, position.batch = position.epoch + 1, 0
            if val is not None:
                scores = validate(model, val, call_kwargs, args.ttt_steps, online)
                progress.emit(phase="val", done=position.step, total=total, epoch=position.epoch - 1, **scores)
                assert metrics_log is not None  # rank 0 validates
                metrics_log.write(
                    split="val", step=position.step, epoch=position.epoch - 1, loss=scores["val_loss"],
                    acc=scores["val_acc"],
                )  # fmt: skip
            if online is not None:
                online.end_epoch()
        checkpoint()
    if metrics_log is not None:
        metrics_log.close()
    return model


def _quiet(**_fields: Any) -> None:
    """A rank other than 0 reports nothing per step: rank 0's lines speak for all of them."""
