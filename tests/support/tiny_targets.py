"""Test helper run by the target venv's Python: tiny targets of the shapes real ones take, built offline.

    python tiny_targets.py remote OUT --tokenizer-from SMOLLM2_DIR    # custom architecture behind auto_map
    python tiny_targets.py wrapper OUT --tokenizer-from SMOLLM2_DIR   # Llava: text_config around a Llama
    python tiny_targets.py reference --model OUT --files HS_DIR       # the text decoder's states, independently

Both targets borrow SmolLM2's tokenizer and chat template (vocab 49152) around random weights: what matters is
where dims, layers and code come from, not what the model says. `reference` prints, per file, the largest
difference between the file's auxiliary layers and HF's `output_hidden_states` of the wrapper's language model.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 49152, "max_position_embeddings": 8192,
        "tie_word_embeddings": True}  # fmt: skip

CONFIGURATION = """from transformers import LlamaConfig


class TinyRemoteConfig(LlamaConfig):
    model_type = "tiny_remote"
"""
MODELING = """from transformers import LlamaForCausalLM

from .configuration_tiny_remote import TinyRemoteConfig


class TinyRemoteForCausalLM(LlamaForCausalLM):
    config_class = TinyRemoteConfig
"""


def copy_tokenizer(source: Path, out: Path) -> None:
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)


def remote(out: Path, tokenizer_from: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**TEXT)).save_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    config.update(
        model_type="tiny_remote",
        architectures=["TinyRemoteForCausalLM"],
        auto_map={
            "AutoConfig": "configuration_tiny_remote.TinyRemoteConfig",
            "AutoModelForCausalLM": "modeling_tiny_remote.TinyRemoteForCausalLM",
        },
    )
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "configuration_tiny_remote.py").write_text(CONFIGURATION)
    (out / "modeling_tiny_remote.py").write_text(MODELING)
    copy_tokenizer(tokenizer_from, out)


def wrapper(out: Path, tokenizer_from: Path) -> None:
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration

    torch.manual_seed(0)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=32, patch_size=16)  # fmt: skip
    config = LlavaConfig(text_config=LlamaConfig(**TEXT), vision_config=vision, image_token_index=49151)
    LlavaForConditionalGeneration(config).save_pretrained(out)
    copy_tokenizer(tokenizer_from, out)


def reference(model_dir: Path, files: Path) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    language_model = model.model.language_model
    for path in sorted(files.glob("hs_*.safetensors")):
        tensors = load_file(str(path))
        layer_ids = _layer_ids(path)
        with torch.inference_mode():
            states = language_model(tensors["token_ids"][None], output_hidden_states=True).hidden_states
        aux = [k for k in layer_ids if k < len(language_model.layers)]
        want = torch.stack([states[k][0] for k in aux], dim=1)
        got = tensors["hidden_states"][:, : len(aux)].float()
        print(json.dumps({"file": path.name, "layers": aux, "max_abs": float((got - want).abs().max())}))


def _layer_ids(path: Path) -> list[int]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return [int(layer) for layer in (handle.metadata() or {})["layer_ids"].split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["remote", "wrapper", "reference"])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--tokenizer-from", type=Path)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--files", type=Path)
    args = parser.parse_args()
    if args.kind == "reference":
        reference(args.model, args.files)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (remote if args.kind == "remote" else wrapper)(args.out, args.tokenizer_from)


if __name__ == "__main__":
    main()
