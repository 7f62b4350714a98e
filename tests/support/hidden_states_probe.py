"""Test helper run by the target venv's Python: measures extract.py's files against independent references.

    python hidden_states_probe.py reference --model DIR --files DIR   # vs a direct, unbatched HF forward pass
    python hidden_states_probe.py compare --files DIR --other DIR     # two extractions of the same samples
    python hidden_states_probe.py vllm-config --model DIR             # the GPU server command line, parsed by vLLM

Prints one JSON object per file. `reference` computes the expectation without extract.py's code: HF's
`output_hidden_states` for the auxiliary layers, a forward pre-hook on the final norm for the last layer,
and the loss mask read off the ChatML structure (from each `<|im_start|>assistant\\n` through the next
`<|im_end|>`), decoded span by span.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file

WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob("hs_*.safetensors"), key=lambda path: int(path.stem[3:]))


def _agreement(got: torch.Tensor, want: torch.Tensor) -> dict[str, float]:
    got, want = got.float(), want.float()
    cosine = torch.nn.functional.cosine_similarity(got, want, dim=-1)
    return {
        "min_cos": float(cosine.min()),
        "mean_cos": float(cosine.mean()),
        "max_rel": float((got - want).abs().max() / want.abs().max()),
    }


def _spans(mask: list[bool]) -> list[tuple[int, int]]:
    spans, start = [], None
    for position, flag in enumerate([*mask, False]):
        if flag and start is None:
            start = position
        elif not flag and start is not None:
            spans.append((start, position))
            start = None
    return spans


def reference(model_dir: Path, directory: Path) -> list[dict[str, Any]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(WORKLOADS))
    from extract_hf import load_dtype

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # In the dtype extract.py computes in here (float32 on a CPU that would emulate bf16), stored as it stores.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=load_dtype("cpu")).eval()
    last = model.config.num_hidden_layers
    pre_norm: list[torch.Tensor] = []
    model.model.norm.register_forward_pre_hook(lambda _module, inputs: pre_norm.append(inputs[0]))
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    results = []
    for path in _files(directory):
        data = load_file(path)
        ids = data["token_ids"]
        pre_norm.clear()
        with torch.inference_mode():
            out = model(input_ids=ids[None], output_hidden_states=True)
        with safe_open(str(path), "pt") as handle:
            layer_ids = [int(layer) for layer in handle.metadata()["layer_ids"].split(",")]
        stored = data["hidden_states"]
        layers = {}
        for slot, layer in enumerate(layer_ids):
            want = pre_norm[0][0] if layer == last else out.hidden_states[layer][0]
            layers[str(layer)] = _agreement(stored[:, slot], want.to(stored.dtype))
        final = out.hidden_states[last][0]
        token_list = ids.tolist()
        oracle = [False] * len(token_list)
        for start in range(len(token_list)):
            if token_list[start : start + len(header)] == header:
                stop = token_list.index(end, start + len(header))
                oracle[start + len(header) : stop + 1] = [True] * (stop + 1 - start - len(header))
        mask = data["loss_mask"].tolist()
        results.append(
            {
                "file": path.name,
                "layers": layers,
                "last_vs_hf_final": _agreement(stored[:, -1], final),
                "normed_last_vs_hf_final": _agreement(model.model.norm(stored[:, -1].to(final.dtype)), final),
                "mask_equals_oracle": mask == oracle,
                "mask_spans": [tokenizer.decode(token_list[a:b]) for a, b in _spans(mask)],
            }
        )
    return results


def compare(directory: Path, other: Path) -> list[dict[str, Any]]:
    results = []
    for path in _files(directory):
        mine, theirs = load_file(path), load_file(other / path.name)
        results.append(
            {
                "file": path.name,
                "token_ids_equal": torch.equal(mine["token_ids"], theirs["token_ids"]),
                "loss_mask_equal": torch.equal(mine["loss_mask"], theirs["loss_mask"]),
                "layers": [
                    _agreement(mine["hidden_states"][:, slot], theirs["hidden_states"][:, slot])
                    for slot in range(mine["hidden_states"].shape[1])
                ],
            }
        )
    return results


def vllm_config(model_dir: Path) -> dict[str, Any]:
    """Build the vllm backend's CUDA command line (stock connector) and let vLLM parse it into an engine config."""
    from argparse import Namespace

    from hs_connectors import FileBackend
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    sys.path.insert(0, str(WORKLOADS))
    from extract_vllm import server_argv

    staging = Path("/data/.hs.vllm-staging")
    argv = server_argv("/venv/bin/python", model_dir, [2, 15, 27, 30], staging, 8000, 4097, "stock")
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[3:])
    validate_parsed_serve_args(args)
    config = AsyncEngineArgs.from_cli_args(args).create_engine_config()
    return {
        "argv": argv,
        "method": config.speculative_config.method,
        "layers": config.speculative_config.draft_model_config.hf_config.eagle_aux_hidden_state_layer_ids,
        "connector": config.kv_transfer_config.kv_connector,
        "extra": config.kv_transfer_config.kv_connector_extra_config,
        "max_model_len": config.model_config.max_model_len,
        "speculators_transfer": FileBackend.build_kv_transfer_config(Namespace(hidden_states_path=str(staging))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["reference", "compare", "vllm-config"])
    parser.add_argument("--files", type=Path)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--other", type=Path)
    args = parser.parse_args()
    if args.mode == "reference":
        print(json.dumps(reference(args.model, args.files)))
    elif args.mode == "compare":
        print(json.dumps(compare(args.files, args.other)))
    else:
        print(json.dumps(vllm_config(args.model)))


if __name__ == "__main__":
    main()
