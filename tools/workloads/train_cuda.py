"""The CUDA path of train.py: speculators' own trainer, launched with torchrun over the host's GPUs; with
--trainer speculators on a CPU, the same command on one gloo rank, plus speculators_cpu's flags and patches.

`speculators_argv` builds the command line; run as a script, this file is the per-rank entry torchrun
starts: it resolves the arguments with speculators' own `TrainConfig` and calls its `main`, after adding a
logging handler that turns the trainer's metric records into eyas progress lines on rank 0. Nothing of the
trainer is replaced on a GPU host (on a CPU, only the four accelerator lines speculators_cpu.py names), so the
result is what `speculators train` with the same flags produces.

TensorBoard: speculators has a `--logger tensorboard` option, but its handler writes through torch.utils.tensorboard,
which needs the tensorboard package the host's target environment lacks. So it stays off, and the same handler that
writes metrics.jsonl writes the event files (training_metrics.MetricsLog), with the tags the CPU loop writes.

The flags mirror the CPU loop's model exactly (one llama decoder layer per --num-layers, full attention,
the norms and warm-up of drafter_recipe.py, KL loss), so both paths train the same drafter.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drafter_recipe import Recipe, patch_speculators_builder, speculators_flags
from speculators_cpu import CPU_FLAGS
from training_metrics import PATH_ENV

TOTAL_STEPS_ENV = "EYAS_TOTAL_STEPS"


def speculators_argv(
    args: Any,
    *,
    python: str,
    nproc: int,
    dataset: Path,
    hidden_states: Path,
    save_path: Path,
    init_drafter: Path | None,
    checkpoint_freq: float,
    span: Span,
    device: str = "cuda",
    master: tuple[str, int] | None = None,
    endpoint: str | None = None,
) -> list[str]:
    """torchrun running this file with speculators' train flags, from train.py's parsed arguments; with
    `master` (node 0's address and port), one of --nodes torchruns that form one job; with `endpoint` (an
    extraction server's /v1), the samples missing on disk are fetched from it. `span`: the epochs and steps to run
    (`span_of`). On a CPU (`device` "cpu") the same command with speculators_cpu.CPU_FLAGS in place of the
    dataloader's workers; the rank entry patches the Trainer there."""
    if master is None:
        where = ["--standalone"]
    else:
        where = [
            f"--nnodes={args.nodes}", f"--node-rank={args.node_rank}", f"--master-addr={master[0]}",
            f"--master-port={master[1]}",
        ]  # fmt: skip
    argv = [
        python, "-m", "torch.distributed.run", *where, f"--nproc-per-node={nproc}",
        str(Path(__file__).resolve()),
        "--speculator-type", "eagle3",
        "--verifier-name-or-path", str(args.verifier),
        "--data-path", str(dataset),
        "--hidden-states-path", str(hidden_states),
        *(["--on-missing", "generate", "--vllm-endpoint", endpoint] if endpoint else ["--on-missing", "raise"]),
        "--save-path", str(save_path),
        "--epochs", str(span.epochs),
        "--lr", repr(args.lr),
        "--optimizer", args.optimizer,
        "--total-seq-len", str(args.total_seq_len),
        "--ttt-steps", str(args.ttt_steps),
        "--train-data-ratio", repr(1 - args.val_ratio),
        "--checkpoint-freq", repr(checkpoint_freq),
        "--seed", str(args.seed),
        "--log-freq", "1",
    ]  # fmt: skip
    if args.trust_remote_code:
        argv.append("--trust-remote-code")
    if init_drafter is not None:
        argv += ["--from-pretrained", str(init_drafter)]
    else:
        argv += ["--num-layers", str(args.num_layers), "--full-attention-indices", *map(str, range(args.num_layers))]
        if args.target_layer_ids:
            argv += ["--target-layer-ids", *map(str, args.target_layer_ids)]
    if args.d2t:
        argv += ["--d2t-path", str(args.d2t), "--t2d-path", str(args.t2d)]
    argv += ["--scheduler-total-steps", str(span.total)]
    if span.max_steps is not None:
        argv += ["--max-steps", str(span.max_steps)]
    if args.dry_run:
        argv.append("--dry-run")
    argv += speculators_flags(Recipe.from_args(args), init_drafter is None, span.total)
    return argv + (list(CPU_FLAGS) if device == "cpu" else ["--num-workers", str(args.num_workers)])


@dataclass(frozen=True)
class Span:
    """What speculators' trainer is told to run so that it takes exactly `total` optimizer steps: `epochs` (--epochs)
    and `max_steps` (--max-steps, None when the epochs end first)."""

    epochs: int
    max_steps: int | None
    total: int


def span_of(per_epoch: list[int], max_steps: int | None) -> Span:
    """The span of a run over epochs of `per_epoch` steps each, stopped after `max_steps` (None: every epoch).

    speculators' trainer stops an epoch at --max-steps but then starts the next, whose first step passes the bound
    again (trainer.py run_training and train_epoch: the check follows the step), so over E epochs it would take
    max_steps + E - 1 steps. The span ends the epochs with the one that reaches the bound."""
    done = 0
    for epoch, steps in enumerate(per_epoch, 1):
        done += steps
        if max_steps is not None and done >= max_steps:
            return Span(epochs=epoch, max_steps=max_steps, total=max_steps)
    return Span(epochs=len(per_epoch), max_steps=None, total=done)


def online_workers(window: int, gpus: int, requested: int, max_steps: int | None) -> int:
    """DataLoader workers per GPU for an online run, at most `requested`, so that speculators' dataset holds no more
    than `window` fetched samples on disk at once: the bound the plan states, which --window sets on CPU.

    Each worker (or the rank itself, with none) fetches, loads and deletes one sample before the next (speculators
    data.py, ArrowDataset._generate_hidden_states_once), so a GPU holds max(workers, 1) samples at once; twice the
    workers when --max-steps ends an epoch early, as the training loader's persistent workers finish the batches
    queued for it while validation's start. ValueError when the GPUs outnumber the window."""
    if gpus > window:
        raise ValueError(
            f"--window {window} is fewer than the {gpus} GPUs: speculators' dataset holds a fetched sample per GPU at "
            f"least; pass --window {gpus} or more (the disk bound grows with it)"
        )
    per_gpu = window // gpus
    return min(requested, per_gpu // 2 if max_steps else per_gpu)


def latest_checkpoint(save_path: Path) -> Path | None:
    """The newest numbered checkpoint directory speculators' trainer wrote (its own layout: <epoch>/)."""
    numbered = [path for path in save_path.glob("*") if path.is_dir() and not path.is_symlink() and path.name.isdigit()]
    return max(numbered, key=lambda path: int(path.name), default=None)


class ProgressHandler(logging.Handler):
    """Turns the trainer's per-step metric records ({"train": {...}, "global_step": n}) into progress lines."""

    def __init__(self, total: int | None, metrics_file: str | None) -> None:
        from training_metrics import tracked_log

        super().__init__()
        self.total = total
        self.metrics = tracked_log(Path(metrics_file)) if metrics_file else None
        self.step = 0  # the last training step seen: validation records carry no step of their own

    def emit(self, record: logging.LogRecord) -> None:
        import progress

        message = record.msg
        if not isinstance(message, Mapping):
            return
        if isinstance(train := message.get("train"), Mapping):
            row = {
                "step": int(message["global_step"]) + 1,
                "epoch": message.get("epoch"),
                "loss": train.get("loss"),
                "acc": _per_position(train, "full_acc_"),
            }
            progress.emit(
                phase="train", done=row["step"], total=self.total, **{k: row[k] for k in ("epoch", "loss", "acc")}
            )
            self.step = row["step"]
            self._record("train", row, lr=message.get("lr"))
        elif isinstance(val := message.get("val"), Mapping):
            row = {
                "epoch": message.get("epoch"),
                "loss": val.get("loss_epoch"),
                "acc": _per_position(val, "full_acc_", "_epoch"),
            }
            progress.emit(phase="val", **row)
            self._record("val", {"step": self.step, **row})

    def close(self) -> None:
        """logging shuts its handlers at the process's exit: the tracked run (if any) ends with it."""
        if self.metrics is not None:
            self.metrics.close()
        super().close()

    def _record(self, split: str, row: dict[str, Any], **extra: Any) -> None:
        if self.metrics is not None:
            self.metrics.write(split=split, **row, **{key: value for key, value in extra.items() if value is not None})


def _per_position(metrics: Mapping[str, Any], prefix: str, suffix: str = "") -> list[float]:
    """Values of `<prefix><position><suffix>` keys in position order (full_acc_0, full_acc_1, ...)."""
    middles = (
        key[len(prefix) : len(key) - len(suffix)] for key in metrics if key.startswith(prefix) and key.endswith(suffix)
    )
    return [metrics[f"{prefix}{position}{suffix}"] for position in sorted(int(m) for m in middles if m.isdigit())]


def _run_rank(argv: list[str]) -> None:
    from speculators.train.cli import main
    from speculators.train.config import TrainConfig
    from speculators.train.logger import setup_root_logger

    if int(os.environ.get("RANK", "0")) == 0:
        # The trainer's own console handler first (its later basicConfig is then a no-op), and ours ahead of
        # it: that handler's filter rewrites the metric dict into text, and ours needs the dict.
        setup_root_logger()
        total = os.environ.get(TOTAL_STEPS_ENV)
        handler = ProgressHandler(int(total) if total else None, os.environ.get(PATH_ENV))
        logging.getLogger().handlers.insert(0, handler)
    import speculators_cpu

    if speculators_cpu.needed():
        speculators_cpu.apply()
    patch_speculators_builder()
    main(TrainConfig.resolve(argv))


if __name__ == "__main__":
    _run_rank(sys.argv[1:])
