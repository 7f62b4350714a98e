"""Test helper run by the target venv's Python: a tiny drafter in SpecForge's EAGLE-3 layout, written offline.

    python specforge_drafter.py write OUT [--hidden 576] [--vocab 49152] [--draft-vocab 256] [--layers 2 15 27]
                                          [--shards N]   # N > 1: model.safetensors.index.json and N shards
    python specforge_drafter.py compare DIR DIR   # two speculators configs, as speculators loads them

The config keys and tensor names are those SpecForge's `LlamaForCausalLMEagle3` saves (its
configs/*-eagle3.json and specforge/modeling/draft/llama3_eagle.py): a Llama config with
`architectures: ["LlamaForCausalLMEagle3"]`, `draft_vocab_size` and `eagle_config`, and the weights
`midlayer.*`, `fc`, `norm`, `lm_head`, `d2t`, `t2d`, with the embeddings left out as its trainer exports them.
The defaults are SmolLM2-135M's dims (hidden 576, 9 heads of 64, 3 KV heads, vocab 49152) and its default
captured layers; the weights are seeded noise.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file


def write(out: Path, hidden: int, vocab: int, draft_vocab: int, layers: list[int], shards: int = 1) -> None:
    heads, kv_heads, head_dim, intermediate = 9, 3, 64, 1536
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": layers, "use_aux_hidden_state": True},
        "model_type": "llama",
        "attention_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "max_position_embeddings": 8192,
        "num_attention_heads": heads,
        "num_hidden_layers": 1,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 100000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
    }
    generator = torch.Generator().manual_seed(0)

    def noise(*size: int) -> torch.Tensor:
        return (torch.randn(*size, generator=generator) * 0.02).to(torch.bfloat16)

    weights = {
        "midlayer.self_attn.q_proj.weight": noise(heads * head_dim, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": noise(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": noise(kv_heads * head_dim, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": noise(hidden, heads * head_dim),
        "midlayer.mlp.gate_proj.weight": noise(intermediate, hidden),
        "midlayer.mlp.up_proj.weight": noise(intermediate, hidden),
        "midlayer.mlp.down_proj.weight": noise(hidden, intermediate),
        "midlayer.hidden_norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "midlayer.input_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "midlayer.post_attention_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "fc.weight": noise(hidden, 3 * hidden),
        "norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        "lm_head.weight": noise(draft_vocab, hidden),
    }
    chosen = torch.sort(torch.randperm(vocab, generator=generator)[:draft_vocab]).values
    weights["d2t"] = chosen - torch.arange(draft_vocab)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[chosen] = True
    weights["t2d"] = t2d
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    if shards == 1:
        save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
        return
    # As transformers' save_pretrained shards a big checkpoint: names in order, dealt out over the files.
    names = sorted(weights)
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: weights[name] for name in names[i::shards]}
        save_file(part, str(out / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    total = sum(tensor.numel() * tensor.element_size() for tensor in weights.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def compare(first: Path, second: Path) -> None:
    """Print the settings in which two converted drafters differ, once speculators has loaded (and defaulted) them."""
    from speculators.models.eagle3 import Eagle3SpeculatorConfig

    ignored = {"transformers_version", "speculators_version", "auto_map", "_name_or_path"}

    def flat(value: object, prefix: str = "") -> dict[str, object]:
        if not isinstance(value, dict):
            return {prefix: value}
        items = {}
        for key, inner in value.items():
            if key not in ignored:
                items.update(flat(inner, f"{prefix}{key}."))
        return items

    one, two = (flat(Eagle3SpeculatorConfig.from_pretrained(str(path)).to_dict()) for path in (first, second))
    differences = {key: [one.get(key), two.get(key)] for key in one.keys() | two.keys() if one.get(key) != two.get(key)}
    print(json.dumps({"differences": differences, "compared": len(one)}, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("write")
    make.add_argument("out", type=Path)
    make.add_argument("--hidden", type=int, default=576)
    make.add_argument("--vocab", type=int, default=49152)
    make.add_argument("--draft-vocab", type=int, default=256)
    make.add_argument("--layers", type=int, nargs=3, default=[2, 15, 27])
    make.add_argument("--shards", type=int, default=1)
    both = commands.add_parser("compare")
    both.add_argument("first", type=Path)
    both.add_argument("second", type=Path)
    args = parser.parse_args()
    if args.command == "compare":
        compare(args.first, args.second)
    else:
        write(args.out, args.hidden, args.vocab, args.draft_vocab, args.layers, args.shards)


if __name__ == "__main__":
    main()
