"""Safetensors files written byte by byte (8-byte header length, JSON header, data), for checkpoint tests
that must not need torch: the format is small enough to write by hand."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """Write zero-filled tensors {name: (dtype, shape)}; returns the file's size."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * ITEM_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    data = struct.pack("<Q", len(blob)) + blob + bytes(offset)
    path.write_bytes(data)
    return len(data)


def write_drafter(directory: Path, *, sharded: bool = False) -> Path:
    """A checkpoint directory shaped like a small EAGLE-3 drafter: config.json and its weights."""
    directory.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["Eagle3DraftModel"], "speculators_model_type": "eagle3", "draft_vocab_size": 64}
    (directory / "config.json").write_text(json.dumps(config))
    tensors = {"fc.weight": ("BF16", [16, 48]), "lm_head.weight": ("BF16", [64, 16]), "d2t": ("I64", [64])}
    if not sharded:
        write_safetensors(directory / "model.safetensors", tensors)
        return directory
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    for shard, members in shards.items():
        write_safetensors(directory / shard, {name: tensors[name] for name in members})
    weight_map = {name: shard for shard, members in shards.items() for name in members}
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory
