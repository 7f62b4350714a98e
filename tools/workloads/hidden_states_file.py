"""One sample's hidden states on disk: the safetensors file vLLM's hidden-states connector writes, plus a loss mask.

Tensors: `token_ids` int64 [seq], `hidden_states` [seq, n_layers, hidden] (bf16 by default; the layers in
ascending id order, the last one the final decoder layer's output before the final norm) and `loss_mask`
bool [seq] (True on the tokens the drafter learns to predict). speculators reads `token_ids` and
`hidden_states` from files named `hs_<index>.safetensors` and ignores the extra tensor. The header's
metadata records the captured layer ids and the sample's id.

The header is read with the standard library only, so eyas itself can check files; writing needs torch.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

# name -> (safetensors dtype code, bytes per element)
DTYPES = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}
TOKEN_ID_BYTES = 8  # int64
LOSS_MASK_BYTES = 1  # bool
MAX_HEADER_BYTES = 1 << 20
TMP_SUFFIX = ".tmp"
HEADER_ALLOWANCE = 1024  # slack for a file's safetensors header (about 300 bytes with our metadata)

# Online training (train.py --online) holds at most this many samples' hidden states on disk at once: fetched from
# the extraction server ahead of the step that reads them, deleted as soon as that step has read them.
ONLINE_WINDOW = 8


def file_name(index: int) -> str:
    return f"hs_{index}.safetensors"


def formula_bytes(tokens: int, hidden_size: int, n_layers: int, dtype: str = "bfloat16") -> int:
    """The planner's size of one file without its header: hidden states, token ids and loss mask."""
    return tokens * (hidden_size * n_layers * DTYPES[dtype][1] + TOKEN_ID_BYTES + LOSS_MASK_BYTES)


def token_file_name(index: int) -> str:
    """A sample whose hidden states train.py fetches online: only its `token_ids` and `loss_mask` are stored."""
    return f"tok_{index}.safetensors"


def online_bound_bytes(window: int, max_len: int, hidden_size: int, n_layers: int, dtype: str) -> int:
    """The most bytes online training's hidden states take at once: `window` samples of `max_len` tokens each, as
    the extraction server writes them (`dtype` is the server's: float32 on a CPU without native bf16)."""
    return window * (formula_bytes(max_len, hidden_size, n_layers, dtype) + HEADER_ALLOWANCE)


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header and the offset where tensor data starts; ValueError when the file is not safetensors."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise ValueError(f"{path}: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: header length {length} is implausible")
        raw = handle.read(length)
    if len(raw) != length:
        raise ValueError(f"{path}: truncated header")
    try:
        header = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not an object")
    return header, 8 + length


def is_complete(path: Path, token_ids: list[int], layer_ids: list[int], hidden_size: int, dtype: str) -> bool:
    """True when the file holds exactly this sample with these layers; cheap (header and token ids only)."""
    seq = len(token_ids)
    return _holds(path, token_ids, layer_ids, {"hidden_states": (DTYPES[dtype][0], [seq, len(layer_ids), hidden_size])})


def tokens_complete(path: Path, token_ids: list[int], layer_ids: list[int]) -> bool:
    """True when the token file holds exactly this sample (for these layers, which online training will fetch)."""
    return _holds(path, token_ids, layer_ids, {})


def _holds(path: Path, token_ids: list[int], layer_ids: list[int], more: dict[str, tuple[str, list[int]]]) -> bool:
    try:
        header, data_start = read_header(path)
        seq = len(token_ids)
        expected = {"token_ids": ("I64", [seq]), **more, "loss_mask": ("BOOL", [seq])}
        tensors = {name for name in header if name != "__metadata__"}
        if tensors != set(expected):
            return False
        for name, (code, shape) in expected.items():
            entry = header.get(name)
            if not isinstance(entry, dict) or entry.get("dtype") != code or entry.get("shape") != shape:
                return False
        if header.get("__metadata__", {}).get("layer_ids") != _layer_text(layer_ids):
            return False
        end = max(entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__")
        if path.stat().st_size != data_start + end:
            return False
        begin, stop = header["token_ids"]["data_offsets"]
        with path.open("rb") as handle:
            handle.seek(data_start + begin)
            stored = handle.read(stop - begin)
        return stored == struct.pack(f"<{seq}q", *token_ids)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def write(
    path: Path, tensors: dict[str, Any], layer_ids: list[int], sample_id: str, hidden_size: int | None = None
) -> int:
    """Write atomically (a hidden temporary file, fsync, rename) so a kill never leaves a partial file. A token
    file records the `hidden_size` its online hidden states will have."""
    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    metadata = {"layer_ids": _layer_text(layer_ids), "sample_id": sample_id}
    if hidden_size is not None:
        metadata["hidden_size"] = str(hidden_size)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(tmp), metadata=metadata)
    os.chmod(tmp, 0o644)  # safetensors creates 0600; the trainer may run as another user
    with tmp.open("rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path.stat().st_size


def remove_partial(directory: Path, shard: tuple[int, int] = (0, 1)) -> int:
    """Delete temporary files a killed run left behind (of this shard's samples only: other shards may be writing
    theirs); returns how many."""
    index, count = shard
    leftovers = []
    for path in [*directory.glob(f".hs_*{TMP_SUFFIX}"), *directory.glob(f".tok_*{TMP_SUFFIX}")]:
        number = path.name[1:].partition("_")[2].partition(".")[0]
        if not number.isdigit() or int(number) % count == index:
            leftovers.append(path)
    for leftover in leftovers:
        leftover.unlink(missing_ok=True)
    return len(leftovers)


def sample_files(directory: Path) -> list[Path]:
    """The sample files of a directory in index order."""
    return _numbered(directory, "hs_")


def token_files(directory: Path) -> list[Path]:
    """The token-only files of a directory (samples left to fetch online) in index order."""
    return _numbered(directory, "tok_")


def training_files(directory: Path) -> list[Path]:
    """Every sample of a directory in index order: its hidden-state file where there is one, else its token file."""
    found = {int(path.stem[3:]): path for path in sample_files(directory)}
    for path in token_files(directory):
        found.setdefault(int(path.stem[4:]), path)
    return [found[index] for index in sorted(found)]


def is_token_file(path: Path) -> bool:
    return path.name.startswith("tok_")


def _numbered(directory: Path, prefix: str) -> list[Path]:
    files = [path for path in directory.glob(f"{prefix}*.safetensors") if path.stem[len(prefix) :].isdigit()]
    return sorted(files, key=lambda path: int(path.stem[len(prefix) :]))


def _layer_text(layer_ids: list[int]) -> str:
    return ",".join(str(layer) for layer in layer_ids)
