"""The one size syntax of eyas: parse what operators type (2.9TB, 2.6TiB, 2.6T as `df -h` prints it), print
decimal units as disk vendors do."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, **{p + "b": 1000**i for i, p in enumerate("kmgtpe", 1)}}
_UNITS |= {p + "ib": 1024**i for i, p in enumerate("kmgtpe", 1)} | {p: 1024**i for i, p in enumerate("kmgtpe", 1)}


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:e(\d+))?\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from '2.9TB' (decimal: KB..PB are powers of 1000), '2.6TiB' (binary) or '2.6T' (binary, as
    `df -h` prints it); a plain number is bytes."""
    match = _SIZE.match(text)
    unit = match.group(3).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: write e.g. 2.9TB, 500GB, 2.6TiB or 1234567 (bytes)")
    return round(float(match.group(1)) * 10 ** int(match.group(2) or 0) * _UNITS[unit])


def format_size(size: float) -> str:
    """Decimal units, like disk vendors and `df -H`: 5.87 TB."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(size) < 1000 or unit == "PB":
            return f"{size:.0f} B" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")
