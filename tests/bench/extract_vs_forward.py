"""Benchmark helper run by the target venv's Python: extract.py's hf path against the bare forward pass, in one process.

    python extract_vs_forward.py --model DIR --input JSONL --work DIR --rounds N --batch-tokens N

Each round runs extract.py's own `run` into a fresh directory (tokenizing, checking, capturing, copying,
writing and fsyncing; the model load is left out of its throughput), then times the decoder's bare
forward pass over the very same token ids in the same batches: no hooks, no copies, no files. One
process and alternating rounds keep both under the same load on shared cores; a first round warms up
and is dropped. Prints one JSON list: per round, the extraction summary and the bare forward figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"
sys.path.insert(0, str(WORKLOADS))
import extract  # noqa: E402 - the workload itself, imported from its directory like on the host
from extract_hf import length_batches, padded  # noqa: E402
from extract_plan import Sample  # noqa: E402
from hidden_states_file import sample_files  # noqa: E402


def bare_forward(decoder: torch.nn.Module, files: Path, batch_tokens: int) -> dict[str, float]:
    samples = []
    for path in sample_files(files):
        with safe_open(str(path), framework="pt") as handle:
            ids = handle.get_tensor("token_ids")
        samples.append(Sample(int(path.stem[3:]), path.stem, ids, torch.ones_like(ids, dtype=torch.bool)))
    started = time.monotonic()
    with torch.inference_mode():
        for batch in length_batches(samples, batch_tokens):
            ids, mask = padded(batch)
            decoder(input_ids=ids, attention_mask=mask, use_cache=False)
    seconds = time.monotonic() - started
    tokens = sum(sample.tokens for sample in samples)
    return {"tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--batch-tokens", type=int, required=True)
    args = parser.parse_args()
    decoder = AutoModelForCausalLM.from_pretrained(args.model, dtype="auto").eval().get_decoder()
    rounds = []
    for number in range(args.rounds + 1):
        out = args.work / f"hf-{number}"
        flags = ["--model", str(args.model), "--input", str(args.input), "--out", str(out)]
        summary = extract.run(extract.parse_args([*flags, "--batch-tokens", str(args.batch_tokens)]))
        rounds.append({"extract": summary, "bare": bare_forward(decoder, out, args.batch_tokens)})
    print(json.dumps(rounds[1:]))


if __name__ == "__main__":
    main()
