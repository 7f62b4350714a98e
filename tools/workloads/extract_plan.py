"""What an extraction run works on: samples, captured layer ids, and the disk room each file needs."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hidden_states_file import HEADER_ALLOWANCE, formula_bytes

if TYPE_CHECKING:  # imported without torch too, by eyas's tests of the pure parts
    import torch

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]I?B|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


class UsageError(ValueError):
    """A command-line value that cannot work; the message names the flag."""


class LayerCountMismatch(UsageError):
    """vLLM returned another number of layers than were asked for: stop before a single bad file is written."""


def check_layer_count(received: int, layer_ids: list[int], sample_id: str) -> None:
    """The vllm backend's guard. A vLLM whose model class cannot hand out the last decoder layer (DeepSeek-family
    models before vllm#46788) returns one state fewer, which would otherwise surface only at training."""
    if received == len(layer_ids):
        return
    raise LayerCountMismatch(
        f"vLLM returned hidden states of {received} layer(s) for sample {sample_id}, but {len(layer_ids)} were asked "
        f"for (layer ids {layer_ids}): this vLLM's model cannot capture all of them (the last layer needs a vLLM "
        "that hands it out for this architecture, see `eyas verify --check compat`). Nothing more was extracted; "
        "rerun with --backend hf, or upgrade vLLM on this host."
    )


@dataclass(frozen=True)
class Sample:
    index: int  # the file is hs_<index>.safetensors; indices count usable conversations from 0
    sample_id: str
    token_ids: torch.Tensor  # int64 [seq]
    loss_mask: torch.Tensor  # bool [seq]

    @property
    def tokens(self) -> int:
        return int(self.token_ids.shape[0])


def resolve_layers(requested: str | None, num_hidden_layers: int) -> list[int]:
    """Layer ids in ascending order (the order vLLM writes them), always ending with the last layer.

    Default: [2, L//2, L-3, L] as speculators uses. The last layer is added when missing: speculators
    trains on it as the verifier's final hidden state.
    """
    last = num_hidden_layers
    if requested is None:
        layers = [2, last // 2, last - 3]
    else:
        try:
            layers = [int(part) for part in requested.split(",") if part.strip()]
        except ValueError:
            raise UsageError(f"--layers must be comma-separated integers, not {requested!r}") from None
    layers = sorted(set(layers) | {last})
    if layers[0] < 0 or layers[-1] > last:
        raise UsageError(f"--layers: ids must be within [0, {last}] for a model with {last} layers, got {layers}")
    return layers


def parse_reserve(text: str, filesystem_bytes: int) -> int:
    """Bytes to keep free: '1GiB', '500MB', '123456' or a share of the filesystem such as '5%'."""
    match = _SIZE.match(text)
    if not match:
        raise UsageError(f"--reserve must be a size such as 1GiB, 500MB or 5%, not {text!r}")
    number, unit = float(match.group(1)), (match.group(2) or "").upper()
    if unit == "%":
        return int(filesystem_bytes * number / 100)
    return int(number * _UNITS[unit])


class DiskFull(Exception):
    """Raised before a file would leave less than the reserve free; the message says what to do."""


@dataclass(frozen=True)
class DiskGuard:
    directory: Path
    reserve_bytes: int
    hidden_size: int
    n_layers: int
    dtype: str

    def file_bytes(self, sample: Sample) -> int:
        return formula_bytes(sample.tokens, self.hidden_size, self.n_layers, self.dtype) + HEADER_ALLOWANCE

    def make_room(self, samples: list[Sample], copies: int = 1) -> None:
        """Refuse to start work whose files (each on disk `copies` times, e.g. staged) would eat into the reserve."""
        need = copies * sum(self.file_bytes(sample) for sample in samples)
        free = shutil.disk_usage(self.directory).free
        if free - need >= self.reserve_bytes:
            return
        first = self.directory / f"hs_{min(sample.index for sample in samples)}.safetensors"
        raise DiskFull(
            f"extract: stopped before writing {first}: {free} bytes are free on the filesystem of "
            f"{self.directory}, the next files need {need} bytes and a reserve of {self.reserve_bytes} bytes "
            "must stay free (--reserve). Every file written so far is complete. Free space there, or point "
            "--out at a larger volume, or extract fewer or shorter samples (--max-samples, --max-tokens), then "
            "run the same command again: it resumes where it stopped."
        )
