#!/usr/bin/env python3
"""Convert a SpecForge (original EAGLE-3 layout) drafter into speculators' format, which eyas trains and vLLM serves.

Run by the target environment's interpreter (torch, safetensors; speculators when it has a converter):

    python convert_drafter.py --source SPECFORGE_DIR --verifier TARGET_DIR --out DRAFTER_DIR

The drafter is first checked against the target (drafter_format.py: hidden size, vocabulary, draft vocabulary,
aux layers, special tokens) and refused with the reasons when it does not fit. Then --mapping auto uses
speculators' own converter (speculators.convert.eagle.eagle3_converter) where the installed speculators has
it, and eyas's mapping (`own`, the same renames written by hand) where it does not. Both write config.json
(speculators_model_type eagle3, the verifier named by --verifier's path) and model.safetensors with
`midlayer.*` renamed to `layers.0.*`; the embeddings, which SpecForge leaves out, come from the verifier.
SpecForge's decoder layer keeps its residual before the hidden norm, so norm_before_residual is false.
A sharded drafter (model.safetensors.index.json and its shards) is read shard by shard; speculators' converter
takes one file only, so it is given the shards joined into one. A JSON summary is printed last.

download.py runs the same conversion when the drafter is fetched, and loads the result as train.py does
(load_for_training), so a drafter that cannot be finetuned is refused before generation, not after extraction.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from drafter_format import SINGLE_FILE, detect, mismatches, weight_files
from target_model import read_config, text_fields

LAYER_KEYS = (
    "attention_bias", "head_dim", "hidden_act", "hidden_size", "intermediate_size", "max_position_embeddings",
    "mlp_bias", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps",
)  # fmt: skip


def has_speculators_converter() -> bool:
    try:
        from speculators.convert.eagle.eagle3_converter import Eagle3Converter  # noqa: F401
    except ImportError:
        return False
    return True


def aux_layers(config: dict[str, Any]) -> list[int] | None:
    layers = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return list(layers) if layers is not None else None


def load_weights(directory: Path) -> dict[str, Any]:
    """Every tensor of the checkpoint, from model.safetensors or from each shard its index names."""
    from safetensors.torch import load_file

    weights: dict[str, Any] = {}
    for name in weight_files(directory) or [SINGLE_FILE]:
        weights.update(load_file(str(directory / name)))
    return weights


def with_speculators(source: Path, verifier: Path, out: Path) -> None:
    from safetensors.torch import save_file
    from speculators.convert.eagle.eagle3_converter import Eagle3Converter

    config = read_config(source)
    joined = None
    if weight_files(source) != [SINGLE_FILE]:  # its loader refuses an index ("use a single-file checkpoint")
        joined = out.with_name(out.name + ".joined")
        shutil.rmtree(joined, ignore_errors=True)
        joined.mkdir(parents=True)
        shutil.copyfile(source / "config.json", joined / "config.json")
        save_file(load_weights(source), str(joined / SINGLE_FILE), metadata={"format": "pt"})
    try:
        Eagle3Converter().convert(
            joined or source, out, base_model=str(verifier), validate=True,
            eagle_aux_hidden_state_layer_ids=aux_layers(config),
        )  # fmt: skip
    finally:
        if joined is not None:
            shutil.rmtree(joined, ignore_errors=True)


def own_config(config: dict[str, Any], target: dict[str, Any], verifier: Path, target_vocab: int) -> dict[str, Any]:
    """speculators' Eagle3SpeculatorConfig as its converter fills it from a SpecForge config."""
    layer: dict[str, Any] = {key: config.get(key) for key in LAYER_KEYS}
    layer.update(
        model_type="llama",
        num_hidden_layers=config.get("num_hidden_layers", 1),
        vocab_size=target_vocab,
        max_position_embeddings=max(
            config.get("max_position_embeddings", 4096), target.get("max_position_embeddings", 4096)
        ),
        attention_bias=config.get("attention_bias", False),
        mlp_bias=config.get("mlp_bias", False),
        tie_word_embeddings=False,
        use_cache=True,
        rope_theta=config.get("rope_theta", 10000.0),
        rope_scaling=config.get("rope_scaling"),
        dtype=config.get("torch_dtype"),
    )
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": config.get("draft_vocab_size", 32000),
        "eagle_aux_hidden_state_layer_ids": aux_layers(config),
        "embed_requires_grad": False,
        "fc_norm": bool(config.get("fc_norm", False)),
        "norm_before_fc": bool(config.get("norm_before_fc", False)),
        "norm_before_residual": False,
        "norm_output": bool(config.get("norm_output", False)),
        "target_hidden_size": config.get("target_hidden_size"),
        "tie_word_embeddings": False,
        "dtype": config.get("torch_dtype"),
        "transformer_layer_config": layer,
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": 3, "accept_tolerance": 0.0, "verifier_accept_k": 1}
            ],
            "verifier": {
                "architectures": target.get("architectures", ["LlamaForCausalLM"]),
                "name_or_path": str(verifier),
            },
        },
    }


def own_mapping(source: Path, verifier: Path, out: Path) -> None:
    """The conversion without speculators: rename `midlayer.` to `layers.0.`, keep the rest, write the config."""
    from safetensors.torch import save_file

    config = read_config(source)
    weights = load_weights(source)
    target = read_config(verifier)
    target_vocab = int(weights["t2d"].shape[0]) if "t2d" in weights else int(text_fields(target)["vocab_size"])
    renamed = {
        ("layers.0." + name[len("midlayer.") :] if name.startswith("midlayer.") else name): tensor.contiguous()
        for name, tensor in weights.items()
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(renamed, str(out / "model.safetensors"), metadata={"format": "pt"})
    converted = own_config(config, target, verifier, target_vocab)
    (out / "config.json").write_text(json.dumps(converted, indent=2) + "\n")


def convert(source: Path, verifier: Path, out: Path, mapping: str = "auto") -> dict[str, Any]:
    """Check the SpecForge drafter against the target, then convert it into `out` (replaced atomically)."""
    config = read_config(source)
    kind = detect(config)
    if kind != "specforge":
        raise SystemExit(
            f"convert_drafter: {source} is a {kind} drafter, not a SpecForge one; "
            + ("use it as is." if kind == "speculators" else "eyas cannot use it.")
        )
    problems = mismatches(config, text_fields(read_config(verifier)))
    if problems:
        raise SystemExit(f"convert_drafter: the drafter in {source} does not fit the target in {verifier}: "
                         + "; ".join(problems) + ". Use a drafter trained for this target, or train one from scratch "
                         "(leave pipeline.drafter_base unset).")  # fmt: skip
    used = ("speculators" if has_speculators_converter() else "own") if mapping == "auto" else mapping
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (with_speculators if used == "speculators" else own_mapping)(source, verifier.resolve(), tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return {"source": str(source), "out": str(out), "mapping": used, "aux_layer_ids": aux_layers(config)}


def linked_copy(source: Path, verifier: Path, out: Path) -> Path:
    """A speculators drafter in `out` whose config names the local verifier, its weight files linked, not copied.

    A drafter's config usually names its verifier by hub id; speculators loads the verifier's embeddings and head
    from that name, which fails on an offline host, so the copy points at `verifier` instead."""
    config = read_config(source)
    config["speculators_config"]["verifier"]["name_or_path"] = str(verifier.resolve())
    files = weight_files(source)
    if files is None:
        raise SystemExit(f"convert_drafter: {source} has no model.safetensors nor model.safetensors.index.json.")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for name in files + ([] if files == [SINGLE_FILE] else ["model.safetensors.index.json"]):
        (tmp / name).symlink_to((source / name).resolve())
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def load_for_training(directory: Path, t2d: Any = None, d2t: Any = None) -> Any:
    """The drafter as train.py finetunes it (train_loop.build_drafter): speculators' Eagle3DraftModel with the
    verifier's embeddings and head, which refuses weights of the wrong shape and a verifier of another width."""
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(str(directory))
    config.transformer_layer_config._attn_implementation = "sdpa"
    return Eagle3DraftModel.from_pretrained(str(directory), config=config, t2d=t2d, d2t=d2t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="the SpecForge drafter's directory")
    parser.add_argument("--verifier", type=Path, required=True, help="the target model's Hugging Face directory")
    parser.add_argument("--out", type=Path, required=True, help="directory for the speculators-format drafter")
    parser.add_argument(
        "--mapping", choices=["auto", "speculators", "own"], default="auto",
        help="auto (default): speculators' converter when installed, else eyas's own renames",
    )  # fmt: skip
    args = parser.parse_args()
    if args.mapping == "speculators" and not has_speculators_converter():
        raise SystemExit("convert_drafter: the installed speculators has no eagle3 converter; use --mapping own.")
    print(json.dumps(convert(args.source, args.verifier, args.out, args.mapping)))


if __name__ == "__main__":
    main()
