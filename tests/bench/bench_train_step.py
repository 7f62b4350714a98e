"""Benchmark: what a CPU training step of the drafter costs beyond its forward and backward pass, per optimizer.

On the same packed batches, in round robin so every variant meets the same load on shared cores, it times
the bare forward + backward of the drafter and full training steps (train_loop.train_step: forward,
backward, clipping, optimizer and scheduler) with AdamW, torch's Muon as is (Newton-Schulz in bfloat16)
and Muon with Newton-Schulz in float32. Each variant trains its own copy of the same initial drafter, so
the losses after the last step compare the optimizers too. Prints, per variant, seconds per step (median
over the timed rounds; the first round warms up and is left out), the ratio train step / (forward +
backward), the mean training loss of the last steps and the validation loss at the end.

    .venv/bin/python tests/bench/bench_train_step.py [--steps 3] [--data HS_DIR --vocab VOCAB_DIR] ...

Without --data it trains on seeded noise in extract.py's format (tests/support/train_probe.py): as fast as real
data, but only the timings mean something then. --data takes extract.py's files (and --vocab vocab.py's
output for them) for losses worth comparing. Runs itself again under the embedded target's Python.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "support"
WORKLOADS = TESTS.parent / "tools" / "workloads"
# Each training variant as train_loop.build_cpu_optimizers takes it: optimizer, dtype of Muon's Newton-Schulz.
OPTIMIZERS = {"adamw": ("adamw", "float32"), "muon-bf16": ("muon", "bfloat16"), "muon-fp32": ("muon", "float32")}
VARIANTS = ("forward+backward", *OPTIMIZERS)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="steps per variant, the first a warm-up (default 3)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--data", type=Path, help="extract.py's hidden-state files (default: seeded noise)")
    parser.add_argument("--vocab", type=Path, help="vocab.py's output for --data (default: made here)")
    parser.add_argument("--draft-vocab", type=int, default=8192, help="as the embedded demo (default 8192)")
    parser.add_argument("--total-seq-len", type=int, default=512, help="as the embedded demo (default 512)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, help="default: as train.py, one core fewer than the machine has")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def run_target(python: Path, *argv: str | Path) -> str:
    done = subprocess.run([str(python), *map(str, argv)], capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{argv[0]} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def outer(args: argparse.Namespace) -> None:
    """Prepare the data with the target's Python, measure in a child process of it, print the table."""
    from eyas.tools.target.embedded import EmbeddedTarget

    target = EmbeddedTarget.from_env()
    with tempfile.TemporaryDirectory(prefix="eyas-bench-train-") as scratch:
        root = Path(scratch)
        data = args.data
        if data is None:
            data = root / "hs"
            run_target(target.python, TESTS / "train_probe.py", "synthetic", "--out", data, "--samples", "160",
                       "--pattern", "random")  # fmt: skip
        vocab = args.vocab
        if vocab is None:
            vocab = root / "vocab"
            run_target(target.python, WORKLOADS / "vocab.py", "--hidden-states", data, "--model", target.model_dir,
                       "--draft-vocab-size", str(args.draft_vocab), "--out", vocab)  # fmt: skip
        inner_argv = [
            Path(__file__).resolve(), "--inner", "--model", target.model_dir, "--data", data, "--vocab", vocab,
            "--steps", str(args.steps), "--draft-vocab", str(args.draft_vocab), "--total-seq-len",
            str(args.total_seq_len), "--lr", repr(args.lr), "--variants", *args.variants, "--work", root / "work",
        ]  # fmt: skip
        if args.threads:
            inner_argv += ["--threads", str(args.threads)]
        result = json.loads(run_target(target.python, *inner_argv).strip().splitlines()[-1])
    report(result, noise=args.data is None)


def report(result: dict[str, Any], *, noise: bool) -> None:
    print(
        f"data: {result['data']} ({'seeded noise' if noise else 'hidden states'}), {result['steps']} steps of "
        f"{result['total_seq_len']} tokens, draft vocab {result['draft_vocab']}, {result['threads']} thread(s)"
    )
    base = result["variants"].get("forward+backward", {}).get("seconds")
    print(f"{'variant':>18} {'s/step':>8} {'x fwd+bwd':>10} {'train loss':>11} {'val loss':>9}")
    for name, row in result["variants"].items():
        ratio = f"{row['seconds'] / base:10.2f}" if base else f"{'-':>10}"
        train_loss = f"{row['train_loss']:11.4f}" if row["train_loss"] is not None else f"{'-':>11}"
        val_loss = f"{row['val_loss']:9.4f}" if row["val_loss"] is not None else f"{'-':>9}"
        print(f"{name:>18} {row['seconds']:8.3f} {ratio} {train_loss} {val_loss}")


def inner(args: argparse.Namespace) -> dict[str, Any]:
    """The measurement itself, in the target environment (torch, speculators)."""
    import numpy as np
    import torch

    sys.path.insert(0, str(WORKLOADS))
    from transformers import get_linear_schedule_with_warmup

    from drafter_data import PackedBatches, stage
    from train_loop import build_cpu_optimizers, build_drafter, loss_kwargs, rates, train_step, validate

    threads = args.threads or max(1, (os.cpu_count() or 1) - 1)
    torch.set_num_threads(threads)
    staged = stage(args.data, args.work / "staged")
    split = {"train_ratio": 0.9, "total_seq_len": args.total_seq_len, "seed": 0}
    train, val = PackedBatches(staged, split="train", **split), PackedBatches(staged, split="val", **split)
    plan = [indices for epoch in range(args.steps) for indices in train.epoch(epoch)][: args.steps]
    if len(plan) < args.steps:
        raise SystemExit(f"{args.data} holds fewer than {args.steps} batches of {args.total_seq_len} tokens")
    d2t = torch.from_numpy(np.load(args.vocab / f"d2t-{args.draft_vocab}.npy"))
    t2d = torch.from_numpy(np.load(args.vocab / f"t2d-{args.draft_vocab}.npy"))
    shape = SimpleNamespace(verifier=args.model, num_layers=1, target_layer_ids=staged.aux_layer_ids, ttt_steps=3)
    call_kwargs = loss_kwargs(3)
    runs = {}
    for name in args.variants:
        torch.manual_seed(0)
        model = build_drafter(shape, staged, None, d2t, t2d)
        model.train()
        optimizers = []
        if name in OPTIMIZERS:
            optimizer, muon_dtype = OPTIMIZERS[name]
            optimizers = build_cpu_optimizers(model, optimizer, args.lr, muon_dtype)
        schedulers = [get_linear_schedule_with_warmup(opt, args.steps // 100, args.steps) for opt in optimizers]
        runs[name] = SimpleNamespace(model=model, optimizers=optimizers, schedulers=schedulers, seconds=[], losses=[])
    for indices in plan:
        batch = train.batch(indices)
        for run in runs.values():
            started = time.perf_counter()
            if run.optimizers:
                metrics = train_step(run.model, batch, call_kwargs, run.optimizers, run.schedulers)
            else:
                _, loss, metrics = run.model(**batch, **call_kwargs)
                run.model.zero_grad()
                loss.backward()
            run.seconds.append(time.perf_counter() - started)
            run.losses.append(rates(metrics, 3)[0])
    last = max(1, args.steps // 5)
    variants = {
        name: {
            "seconds": statistics.median(run.seconds[1:] or run.seconds),
            "train_loss": statistics.mean(run.losses[-last:]) if run.optimizers else None,
            "val_loss": validate(run.model, val, call_kwargs, 3)["val_loss"] if run.optimizers else None,
        }
        for name, run in runs.items()
    }
    facts = {"steps": args.steps, "total_seq_len": args.total_seq_len, "draft_vocab": args.draft_vocab}
    return {"data": str(args.data), "threads": threads, **facts, "variants": variants}


def main() -> None:
    args = parse_args()
    if args.inner:
        print(json.dumps(inner(args)))
    else:
        outer(args)


if __name__ == "__main__":
    main()
