"""Loading the target as every workload must: the text model behind any wrapper, remote code only when allowed.

A multimodal or wrapper config (Kimi-K2.5, Llava, Qwen-VL) keeps its text model's dimensions in `text_config`;
the drafter drafts for that text model, so its hidden size, layer count, vocabulary, chat template and the
decoder whose layers are captured all come from there. The planner reads config.json the same way
(`text_fields`). A target whose config or tokenizer names its own code (`auto_map`) is loaded only with
--trust-remote-code, which eyas passes when the production unit starts vLLM with it or the config says so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REMOTE_CODE_FLAG = "--trust-remote-code"


class TargetLoadError(SystemExit):
    """The target cannot be loaded as asked; the message names the cause and the fix."""


def add_remote_code_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        REMOTE_CODE_FLAG,
        action="store_true",
        help="run the model directory's own Python code (its config's auto_map); eyas sets it when the production "
        "vLLM unit does",
    )


def read_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise TargetLoadError(f"No config.json in {model_dir}; pass the target model's Hugging Face directory.")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def text_fields(config: dict[str, Any]) -> dict[str, Any]:
    """config.json's text model: the top level with `text_config` merged over it (a wrapper's dims live there)."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def needs_remote_code(model_dir: Path) -> list[str]:
    """The files of the directory that name their own code (auto_map), which transformers runs only when trusted."""
    named = []
    for name in ("config.json", "tokenizer_config.json"):
        path = model_dir / name
        if path.is_file() and json.loads(path.read_text()).get("auto_map"):
            named.append(name)
    return named


def check_remote_code(model_dir: Path, trust_remote_code: bool) -> None:
    """Refuse, before transformers asks on a terminal nobody reads, a target whose code was not trusted."""
    named = needs_remote_code(model_dir)
    if named and not trust_remote_code:
        raise TargetLoadError(
            f"The target in {model_dir} needs its own Python code (auto_map in {' and '.join(named)}), "
            f"and it was not trusted. If the production vLLM unit runs it with {REMOTE_CODE_FLAG}, eyas passes "
            f"the flag after verify reads the unit; otherwise set target.trust_remote_code = true in the eyas "
            f"config, or run this script with {REMOTE_CODE_FLAG}, after reading that code."
        )


def load_text_config(model_dir: Path, trust_remote_code: bool) -> Any:
    """The text model's transformers config (the config itself when it wraps nothing)."""
    from transformers import AutoConfig

    check_remote_code(model_dir, trust_remote_code)
    config = AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    return text_config_of(config)


def text_config_of(config: Any) -> Any:
    if hasattr(config, "get_text_config"):
        return config.get_text_config()
    return getattr(config, "text_config", config)


def load_tokenizer(model_dir: Path, trust_remote_code: bool) -> Any:
    """The target's tokenizer, with the chat template a multimodal model may keep beside it (its processor's)."""
    from transformers import AutoTokenizer

    check_remote_code(model_dir, trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    if getattr(tokenizer, "chat_template", None) is None:
        for name in ("chat_template.jinja", "chat_template.json"):
            path = model_dir / name
            if path.is_file():
                text = path.read_text()
                tokenizer.chat_template = json.loads(text)["chat_template"] if name.endswith(".json") else text
                break
    return tokenizer


def load_model(model_dir: Path, trust_remote_code: bool, **kwargs: Any) -> Any:
    """The whole target model: a causal LM, or for a wrapper with no causal-LM class, its image-text class."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    check_remote_code(model_dir, trust_remote_code)
    try:
        return AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=trust_remote_code, **kwargs)
    except ValueError as error:
        if "Unrecognized configuration class" not in str(error):
            raise
    return AutoModelForImageTextToText.from_pretrained(model_dir, trust_remote_code=trust_remote_code, **kwargs)


def text_decoder(model: Any) -> Any:
    """The text decoder (the module holding `layers` and the final `norm`), however deep a wrapper keeps it."""
    candidates = [model.get_decoder()] if hasattr(model, "get_decoder") else []
    for path in ("language_model", "model.language_model", "language_model.model", "model"):
        module = model
        for part in path.split("."):
            module = getattr(module, part, None)
        candidates.append(module)
    for module in candidates:
        if module is not None and hasattr(module, "layers") and hasattr(module, "norm"):
            return module
    raise TargetLoadError(
        f"Found no text decoder (a module with `layers` and `norm`) in {type(model).__name__}; extract with the "
        "vllm backend (--backend vllm), which captures layers inside vLLM."
    )
