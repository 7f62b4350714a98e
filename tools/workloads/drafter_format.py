"""What kind of EAGLE-3 drafter a checkpoint is, and whether it fits the target, read from config.json alone.

Two layouts exist in the wild. speculators writes `speculators_model_type: "eagle3"` with the draft decoder in
`transformer_layer_config` and the target's layers in `eagle_aux_hidden_state_layer_ids`. SpecForge (and the
original EAGLE-3 code) writes a plain Llama config with `architectures: ["LlamaForCausalLMEagle3"]`,
`draft_vocab_size`, and the aux layers in `eagle_config.eagle_aux_hidden_state_layer_ids`; its weights are
named `midlayer.*` where speculators has `layers.0.*`. eyas trains and serves the speculators layout, so a
SpecForge drafter is converted (convert_drafter.py) and anything else is refused before it costs a run.

Pure JSON: imported by the control plane (verify) and by download.py on the host, without torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Format = Literal["speculators", "specforge", "unknown"]
SPECFORGE_ARCHITECTURES = ("LlamaForCausalLMEagle3",)
SINGLE_FILE = "model.safetensors"
INDEX = "model.safetensors.index.json"  # a sharded checkpoint: weight_map names each tensor's shard


@dataclass(frozen=True)
class DrafterShape:
    """The numbers a drafter fixes about its target."""

    format: Format
    target_hidden_size: int | None  # width of each hidden state it reads from the target
    target_vocab_size: int | None
    draft_vocab_size: int | None
    aux_layer_ids: list[int] | None  # None: the reader's default ([2, L//2, L-3])


def detect(config: dict[str, Any]) -> Format:
    if config.get("speculators_model_type") == "eagle3":
        return "speculators"
    architectures = config.get("architectures") or []
    if any(name in SPECFORGE_ARCHITECTURES for name in architectures) or "eagle_config" in config:
        return "specforge"
    return "unknown"


def shape(config: dict[str, Any]) -> DrafterShape:
    kind = detect(config)
    if kind == "speculators":
        layer = config.get("transformer_layer_config") or {}
        return DrafterShape(
            kind,
            config.get("target_hidden_size") or layer.get("hidden_size"),
            layer.get("vocab_size"),
            config.get("draft_vocab_size"),
            config.get("eagle_aux_hidden_state_layer_ids"),
        )
    if kind == "specforge":
        eagle = config.get("eagle_config") or {}
        return DrafterShape(
            kind,
            config.get("target_hidden_size") or config.get("hidden_size"),
            config.get("vocab_size"),
            config.get("draft_vocab_size") or config.get("vocab_size"),
            eagle.get("eagle_aux_hidden_state_layer_ids"),
        )
    return DrafterShape(kind, None, None, None, None)


def mismatches(drafter: dict[str, Any], target: dict[str, Any]) -> list[str]:
    """Why the drafter cannot serve or be finetuned for the target ([] when it can); `target` is the text model's
    config (target_model.text_fields)."""
    found = shape(drafter)
    if found.format == "unknown":
        return [
            "its config.json is neither a speculators eagle3 drafter (speculators_model_type) nor a SpecForge/EAGLE-3 "
            f"one (architectures {SPECFORGE_ARCHITECTURES[0]}, eagle_config); architectures: "
            f"{drafter.get('architectures')}"
        ]
    problems = []
    hidden, vocab, layers = target.get("hidden_size"), target.get("vocab_size"), target.get("num_hidden_layers")
    if found.target_hidden_size != hidden:
        problems.append(f"it reads hidden states of width {found.target_hidden_size}, the target's are {hidden}")
    if found.target_vocab_size != vocab:
        problems.append(f"its target vocabulary has {found.target_vocab_size} tokens, the target's has {vocab}")
    if found.draft_vocab_size is not None and vocab is not None and found.draft_vocab_size > vocab:
        problems.append(f"its draft vocabulary ({found.draft_vocab_size}) is larger than the target's ({vocab})")
    if found.aux_layer_ids is not None and layers is not None:
        outside = [layer for layer in found.aux_layer_ids if not 0 <= layer < layers]
        if outside or len(found.aux_layer_ids) != 3:
            problems.append(
                f"it reads the target's layers {found.aux_layer_ids}, but EAGLE-3 needs 3 of the target's "
                f"{layers} layers"
            )
    for key in ("bos_token_id", "eos_token_id"):
        mine, theirs = drafter.get(key), target.get(key)
        if isinstance(mine, int) and isinstance(theirs, int) and mine != theirs:
            problems.append(f"its {key} is {mine}, the target's is {theirs}: another tokenizer")
    return problems


def tensor_mismatches(shapes: dict[str, list[int]], target: dict[str, Any]) -> list[str]:
    """What the weights' shapes (from the safetensors headers) say against the target's text config."""
    hidden, vocab = target.get("hidden_size"), target.get("vocab_size")
    problems = []
    if "t2d" in shapes and vocab is not None and shapes["t2d"] != [vocab]:
        problems.append(f"its t2d maps {shapes['t2d'][0]} target tokens, the target has {vocab}")
    fc = shapes.get("fc.weight")
    if fc is not None and hidden is not None and len(fc) == 2 and fc[1] % hidden:
        problems.append(f"its fc layer takes {fc[1]} values, not a multiple of the target's hidden size {hidden}")
    return problems


def weight_files(directory: Path) -> list[str] | None:
    """The checkpoint's safetensors files: model.safetensors, or every shard its index names (a big drafter, such as
    Kimi-K2's, is saved in shards); None when it has neither."""
    if (directory / SINGLE_FILE).is_file():
        return [SINGLE_FILE]
    if (directory / INDEX).is_file():
        return sorted(set(json.loads((directory / INDEX).read_text())["weight_map"].values()))
    return None
