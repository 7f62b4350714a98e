#!/usr/bin/env python3
"""Turn a GGUF checkpoint into a Hugging Face model directory that vLLM and speculators can load.

Run by the target environment's interpreter (it needs torch, transformers, gguf and accelerate):

    python convert_gguf.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --out ./SmolLM2-135M-Instruct

transformers dequantizes a GGUF file on load but refuses to save such a model, so the weights are
copied into a fresh model built from the same config, which saves normally. The tokenizer and its
chat template come from the GGUF metadata.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def convert(gguf: Path, out: Path, dtype: str) -> dict[str, object]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    directory, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch_dtype)
    config = AutoConfig.from_pretrained(directory, gguf_file=name)
    config.torch_dtype = torch_dtype
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings legitimately leave lm_head out of the state dict.
    missing = [key for key in missing if not (config.tie_word_embeddings and key == "lm_head.weight")]
    if missing or unexpected:
        raise SystemExit(f"weights do not match the config: missing={missing} unexpected={unexpected}")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return {
        "out": str(out),
        "architecture": type(fresh).__name__,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "vocab_size": config.vocab_size,
        "dtype": dtype,
        "has_chat_template": bool(tokenizer.chat_template),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gguf", type=Path, required=True, help="the .gguf file to convert")
    parser.add_argument("--out", type=Path, required=True, help="the model directory to write")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args()
    if not args.gguf.is_file():
        raise SystemExit(f"no GGUF file at {args.gguf}")
    print(json.dumps(convert(args.gguf.resolve(), args.out.resolve(), args.dtype)))


if __name__ == "__main__":
    main()
