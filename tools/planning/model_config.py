"""The target model as its directory on the host describes it: its shape (config.json; a wrapper's `text_config`, as
Kimi-K2.5's `kimi_k25` keeps its DeepSeek-V3 dims), the bytes of its weights, and the context vLLM serves it at when
its launch sets no --max-model-len.

The plan reads the directory the server says it loaded (/v1/models' `root`), or target.model_dir when the server
cannot answer (stopped for a phase, or still loading 594 GB): with production down the plan still has the model's
shape, the weights' size (and so production's load time), and the context the run's sizes must fit.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from typing import Any

from pydantic import ValidationError

from eyas.tools.errors import EyasError, RemoteFileNotFound
from eyas.tools.hosts.host import Host
from eyas.tools.planning.model_dims import ModelDims

# The keys vLLM takes a model's longest sequence from, the smallest winning (vllm/transformers_utils/
# model_arch_config_convertor.py, derive_max_model_len_and_key), and the RoPE types whose `factor` it does not apply
# again because the length is already scaled (vllm/config/model.py, _get_and_verify_max_len; vLLM 0.32).
MAX_LEN_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length", "max_target_positions",
    "max_sequence_length", "max_seq_length", "seq_len",
)  # fmt: skip
SCALED_ROPE_TYPES = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# A tokenizer's model_max_length above this is the "no limit" sentinel transformers writes (1e30), not a length.
NO_TOKENIZER_LIMIT = 10**12


class MeasureError(EyasError):
    """A figure the plan needs could not be measured; the message names the flag that gives it instead."""


def model_config_path(host: Host, root: str) -> str:
    """config.json of a served model: in its directory, or in the host's hub cache for a hub id."""
    if root.startswith("/"):
        return f"{root.rstrip('/')}/config.json"
    cache = '"${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"'
    folder = shlex.quote("models--" + root.replace("/", "--"))
    found = host.run(f"ls -1t {cache}/{folder}/snapshots/*/config.json 2>/dev/null | head -n 1", timeout=30)
    if not found.stdout.strip():
        raise MeasureError(
            f"The server loaded {root} by hub id and its config.json is not in the hub cache on {host.name}; set "
            "target.model_dir to the model's directory there, or give --hidden-size, --num-layers and --vocab-size."
        )
    return found.stdout.strip()


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """config.json's text model: the top level with a wrapper's `text_config` merged over it."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def active_intermediate_size(config: dict[str, Any]) -> int | None:
    """The MLP width one token passes through in a MoE: its routed experts per token plus the shared ones
    (DeepSeek's n_shared_experts, Qwen-MoE's shared_expert_intermediate_size); None for a dense model."""
    per_token = config.get("num_experts_per_tok")
    experts = config.get("n_routed_experts") or config.get("num_experts") or config.get("num_local_experts")
    if not isinstance(per_token, int) or not isinstance(experts, int) or per_token <= 0:
        return None
    expert = config.get("moe_intermediate_size") or config.get("intermediate_size")  # Mixtral: each expert's width
    if not isinstance(expert, int):
        return None
    shared = config.get("n_shared_experts") or 0
    shared_width = config.get("shared_expert_intermediate_size") or 0
    return (per_token + int(shared)) * expert + int(shared_width)


def default_max_model_len(config: dict[str, Any], tokenizer_limit: int | None = None) -> int | None:
    """The context vLLM derives when the launch sets no --max-model-len: the smallest of MAX_LEN_KEYS (and the
    tokenizer's model_max_length), times the RoPE scaling factor unless its type is already scaled; None when the
    config has none of the keys (vLLM then assumes 2,048 and warns)."""
    lengths = [config[key] for key in MAX_LEN_KEYS if isinstance(config.get(key), int) and config[key] > 0]
    if not lengths:
        return None
    length = min([*lengths, *([tokenizer_limit] if tokenizer_limit else [])])
    rope = config.get("rope_parameters") or config.get("rope_scaling")
    if isinstance(rope, dict):
        kind = rope.get("rope_type", rope.get("type"))
        factor = rope.get("factor")
        if kind not in SCALED_ROPE_TYPES and isinstance(factor, int | float) and factor > 0:
            length = int(length * factor)
    return length


def tokenizer_limit(host: Host, model_dir: str) -> int | None:
    """tokenizer_config.json's model_max_length, where it is a real length."""
    with contextlib.suppress(RemoteFileNotFound, ValueError):
        limit = json.loads(host.read_text(f"{model_dir.rstrip('/')}/tokenizer_config.json")).get("model_max_length")
        if isinstance(limit, int | float) and 0 < limit < NO_TOKENIZER_LIMIT:
            return int(limit)
    return None


def read_model_dims(host: Host, config_path: str) -> ModelDims:
    """Hidden size, layers and vocab from a config.json (a wrapper's text_config wins), with a MoE's active MLP
    width and the context vLLM would serve it at."""
    try:
        raw: Any = json.loads(host.read_text(config_path))
    except RemoteFileNotFound:
        raise MeasureError(
            f"There is no {config_path} on {host.name}: point target.model_dir at the model's directory there, or "
            "give the model's shape with --hidden-size, --num-layers and --vocab-size."
        ) from None
    except ValueError as exc:
        raise MeasureError(
            f"{config_path} on {host.name} is not JSON ({exc}); give the model's shape with flags."
        ) from None
    config = text_config(raw if isinstance(raw, dict) else {})
    model_dir = config_path.rsplit("/", 1)[0]
    try:
        return ModelDims(
            hidden_size=config["hidden_size"],
            num_layers=config["num_hidden_layers"],
            vocab_size=config["vocab_size"],
            intermediate_size=config.get("intermediate_size"),
            active_intermediate_size=active_intermediate_size(config),
            default_max_model_len=default_max_model_len(config, tokenizer_limit(host, model_dir)),
        )
    except KeyError as exc:
        raise MeasureError(f"{config_path} on {host.name} has no {exc}; give the model's shape with flags.") from None
    except ValidationError as exc:
        problems = "; ".join(f"{item['loc'][0]} {item['msg'].lower()}" for item in exc.errors())
        raise MeasureError(f"{config_path} on {host.name}: {problems}; give the model's shape with flags.") from None


def weights_on_disk(host: Host, model_dir: str) -> int | None:
    """The model's weight files in bytes (safetensors or bin, as du counts them: a sparse file by its size), None
    when the directory cannot be read."""
    found = host.run(
        f"cd {shlex.quote(model_dir)} && du -cbL -- *.safetensors *.bin 2>/dev/null | tail -n 1", timeout=60
    )
    words = found.stdout.split()
    return int(words[0]) if words and words[0].isdigit() and int(words[0]) > 0 else None
