"""How fast this host extracts hidden states and trains a drafter, measured in under a minute on synthetic data.

The planner used to assume a FLOP/s figure per CPU core or GPU, and was off by 3-4x both ways on CPUs (on a
2-core machine it planned 31 minutes of demo training that took 8). This probe times the real code paths on
the real model instead: extract_hf's forward pass over a few samples of the run's length, written as
extract.py writes them, then a few optimizer steps of the drafter train.py would build, on those files,
through the same staging, packing and step (drafter_data, train_loop). Token ids are random: speed does not
depend on what they say. The first batch and the first step warm up and are left out of the timing.

    python speed_probe.py --model DIR --sample-tokens 400 --total-seq-len 512 --draft-vocab-size 8192

prints one JSON object: extraction and training tokens/s, and what they were measured with.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from target_model import add_remote_code_flag

WARMUP = 1  # batches or steps left out of the timing: first-call allocations and lazy initialisation


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the target model's HF directory")
    parser.add_argument("--sample-tokens", type=int, required=True, help="tokens per synthetic sample")
    parser.add_argument("--total-seq-len", type=int, required=True, help="tokens packed into one training step")
    parser.add_argument("--draft-vocab-size", type=int, required=True)
    parser.add_argument("--ttt-steps", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="timed training steps (default 2)")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="extraction: padded tokens per forward pass")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    add_remote_code_flag(parser)
    args = parser.parse_args(argv)
    if min(args.sample_tokens, args.total_seq_len, args.draft_vocab_size, args.steps) < 1:
        parser.error("--sample-tokens, --total-seq-len, --draft-vocab-size and --steps must be positive")
    return args


def synthetic_samples(count: int, tokens: int, vocab_size: int) -> list[Any]:
    import torch

    from extract_plan import Sample

    generator = torch.Generator().manual_seed(0)
    return [
        Sample(
            index=index,
            sample_id=f"probe-{index}",
            token_ids=torch.randint(vocab_size, (tokens,), generator=generator),
            loss_mask=torch.ones(tokens, dtype=torch.bool),
        )
        for index in range(count)
    ]


def probe_extraction(args: argparse.Namespace, device: str, config: Any, out: Path) -> dict[str, Any]:
    """Forward passes as extract.py's hf backend makes them, files written as it writes them."""
    import torch

    from extract_hf import HfBackend
    from extract_plan import resolve_layers
    from hidden_states_file import file_name, write

    layer_ids = resolve_layers(None, config.num_hidden_layers)
    per_batch = max(1, args.batch_tokens // args.sample_tokens)
    # Enough samples for a warm-up batch and a timed one, and for the training steps' packed rows.
    per_step = max(1, args.total_seq_len // args.sample_tokens)
    count = max(per_batch * (WARMUP + 1), per_step * (WARMUP + args.steps))
    samples = synthetic_samples(count, args.sample_tokens, config.vocab_size)
    backend = HfBackend(args.model, layer_ids, device, torch.bfloat16, args.batch_tokens, args.trust_remote_code)
    timed_tokens, started, batches = 0, time.monotonic(), 0
    last_index = -1
    for sample, hidden in backend.extract(samples, lambda batch: None):
        tensors = {"token_ids": sample.token_ids, "hidden_states": hidden, "loss_mask": sample.loss_mask}
        write(out / file_name(sample.index), tensors, layer_ids, sample.sample_id)
        batches += sample.index // per_batch != last_index // per_batch
        last_index = sample.index
        if batches <= WARMUP:
            started = time.monotonic()  # the clock starts after the warm-up batch's files are written
        else:
            timed_tokens += sample.tokens
    backend.close()
    seconds = time.monotonic() - started
    return {"extraction_tok_s": timed_tokens / seconds, "extraction_tokens": timed_tokens, "layer_ids": layer_ids}


def probe_training(args: argparse.Namespace, data: Path, work: Path, vocab_size: int) -> dict[str, Any]:
    """Optimizer steps of a new drafter, built and stepped as train.py's CPU loop (or its CUDA device) does it."""
    import numpy as np
    import torch

    from drafter_data import PackedBatches, stage
    from train import resolve_optimizer
    from train_loop import build_cpu_optimizers, build_drafter, loss_kwargs, train_step

    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    if device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - 1))  # as train.py: a core left to the rest
    draft = min(args.draft_vocab_size, vocab_size)
    selected = np.arange(draft, dtype=np.int64)
    d2t = torch.from_numpy(selected - np.arange(draft, dtype=np.int64))
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[:draft] = True
    staged = stage(data, work / "staged")
    shape = SimpleNamespace(
        verifier=args.model, num_layers=1, target_layer_ids=staged.aux_layer_ids, ttt_steps=args.ttt_steps,
        trust_remote_code=args.trust_remote_code,
    )  # fmt: skip
    model = build_drafter(shape, staged, None, d2t, t2d).to(device)
    model.train()
    call_kwargs = loss_kwargs(args.ttt_steps)
    optimizer = resolve_optimizer("auto", device)
    optimizers = build_cpu_optimizers(model, optimizer, 1e-4, "float32" if device == "cpu" else "bfloat16")
    schedulers = [torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0) for opt in optimizers]
    batches = PackedBatches(staged, split="train", train_ratio=1.0, total_seq_len=args.total_seq_len, seed=0)
    order = batches.epoch(0)[: WARMUP + args.steps]
    timed_tokens, seconds = 0, 0.0
    for step, indices in enumerate(order):
        batch = {key: value.to(device) for key, value in batches.batch(indices).items()}
        started = time.monotonic()
        train_step(model, batch, call_kwargs, optimizers, schedulers)
        if device == "cuda":
            torch.cuda.synchronize()
        if step >= WARMUP:
            seconds += time.monotonic() - started
            timed_tokens += int((batch["document_ids"] != -1).sum())
    if not seconds:
        raise SystemExit("Too few synthetic samples for a timed training step; raise --sample-tokens.")
    return {"training_tok_s": timed_tokens / seconds, "training_tokens": timed_tokens, "optimizer": optimizer}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from target_model import load_text_config, read_config

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    read_config(args.model)  # a missing model directory said in one line, before transformers takes it for a hub id
    config = load_text_config(args.model, args.trust_remote_code)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eyas-speed-probe-") as tmp:
        data, work = Path(tmp) / "hidden_states", Path(tmp) / "work"
        data.mkdir()
        result = {"device": device, "sample_tokens": args.sample_tokens, "total_seq_len": args.total_seq_len}
        result |= probe_extraction(args, device, config, data)
        result |= probe_training(args, data, work, config.vocab_size)
    result["probe_seconds"] = round(time.monotonic() - started, 1)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
