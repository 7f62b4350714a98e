"""The hf backend of extract.py: a transformers forward pass capturing what vLLM's extractor captures.

vLLM's layer id k is the residual stream entering decoder layer k (id 0: the embeddings), which is
transformers' `hidden_states[k]` for k < L. Id L (the number of layers) is the last decoder layer's
output BEFORE the final norm, while transformers' `hidden_states[L]` has the norm applied. So every id
is captured uniformly as the input of a module: decoder layer k for k < L, the final norm for k = L.
The decoder runs without the LM head: no logits are computed. On a CPU without native bf16 the model
computes in float32 (bf16 would be emulated, many times slower); the files keep the --dtype asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from cpu_caps import cpu_compute_dtype
from extract_plan import Sample
from target_model import load_model, text_decoder


def length_batches(samples: list[Sample], batch_tokens: int) -> list[list[Sample]]:
    """Group samples of similar length (longest first) so padding wastes little; one sample may exceed the budget."""
    batches: list[list[Sample]] = []
    for sample in sorted(samples, key=lambda s: (-s.tokens, s.index)):
        batch = batches[-1] if batches else None
        # Sorted longest first, so the batch's first sample sets its padded length.
        if batch and (len(batch) + 1) * batch[0].tokens <= batch_tokens:
            batch.append(sample)
        else:
            batches.append([sample])
    return batches


def padded(batch: list[Sample]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Input ids right-padded to the longest sample, and the attention mask (None for a single sample).

    Right padding under a causal mask leaves the real tokens' states unchanged.
    """
    ids = torch.zeros((len(batch), batch[0].tokens), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, sample in enumerate(batch):
        ids[row, : sample.tokens] = sample.token_ids
        mask[row, : sample.tokens] = 1
    return ids, mask if len(batch) > 1 else None


def load_dtype(device: str) -> str:
    """The dtype to load the model in: its own, except float32 on a CPU that would emulate bf16."""
    return "float32" if device == "cpu" and cpu_compute_dtype() == "float32" else "auto"


class HfBackend:
    def __init__(
        self,
        model_dir: Path,
        layer_ids: list[int],
        device: str,
        dtype: torch.dtype,
        batch_tokens: int,
        trust_remote_code: bool = False,
    ):
        self.batch_tokens = batch_tokens
        self.dtype = dtype
        placement: dict[str, Any] = {"device_map": "auto"} if device == "cuda" else {}
        self.model = load_model(model_dir, trust_remote_code, dtype=load_dtype(device), **placement)
        if device == "cpu":
            self.model.to("cpu")
        self.model.eval()
        self.decoder = text_decoder(self.model)
        n_layers = len(self.decoder.layers)
        modules = [self.decoder.layers[k] if k < n_layers else self.decoder.norm for k in layer_ids]
        self.captured: list[torch.Tensor | None] = [None] * len(modules)
        for slot, module in enumerate(modules):
            module.register_forward_pre_hook(self._capture(slot), with_kwargs=True)
        self.input_device = self.decoder.get_input_embeddings().weight.device

    def _capture(self, slot: int) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self.captured[slot] = args[0] if args else kwargs["hidden_states"]

        return hook

    def extract(self, samples: list[Sample], make_room: Callable[[list[Sample]], None]) -> Iterator[tuple[Sample, Any]]:
        for batch in length_batches(samples, self.batch_tokens):
            make_room(batch)
            yield from zip(batch, self._forward(batch), strict=True)

    @torch.inference_mode()
    def _forward(self, batch: list[Sample]) -> list[torch.Tensor]:
        ids, mask = padded(batch)
        self.decoder(
            input_ids=ids.to(self.input_device),
            attention_mask=None if mask is None else mask.to(self.input_device),
            use_cache=False,
        )
        layers = [tensor.to("cpu", self.dtype) for tensor in self.captured if tensor is not None]
        self.captured = [None] * len(self.captured)
        stacked = torch.stack(layers, dim=2)  # [batch, width, n_layers, hidden]
        return [stacked[row, : sample.tokens].clone() for row, sample in enumerate(batch)]

    def close(self) -> None:
        return None
