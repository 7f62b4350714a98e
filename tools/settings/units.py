"""The one size syntax of eyas: parse what operators type (2.9TB, 2.6TiB, 2.6T as `df -h` prints it), print
decimal units as disk vendors do."""

from __future__ import annotations

import math
import re

_UNITS = {"": 1, "b": 1, **{p + "b": 1000**i for i, p in enumerate("kmgtpe", 1)}}
_UNITS |= {p + "ib": 1024**i for i, p in enumerate("kmgtpe", 1)} | {p: 1024**i for i, p in enumerate("kmgtpe", 1)}


_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:e(\d+))?\s*([a-z]*)\s*$", re.IGNORECASE)
# The largest size eyas takes: above any disk or cluster (9.2 EB), and what a checkpoint can still store (an integer
# above 2**63 cannot be written, tools/settings/sizes.py). 1e400TB would otherwise overflow a float.
MAX_BYTES = 2**63 - 1


def parse_size(text: str) -> int:
    """Bytes from '2.9TB' (decimal: KB..PB are powers of 1000), '2.6TiB' (binary) or '2.6T' (binary, as
    `df -h` prints it); a plain number is bytes. At most MAX_BYTES."""
    match = _SIZE.match(text)
    unit = match.group(3).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size: write e.g. 2.9TB, 500GB, 2.6TiB or 1234567 (bytes)")
    # float() reads the exponent itself: 1e400 is inf at once, where 10 ** 400 would be an int too large to scale.
    size = float(f"{match.group(1)}e{match.group(2) or 0}") * _UNITS[unit]
    if not size <= MAX_BYTES:
        raise ValueError(
            f"{text!r} is more than eyas takes for a size (at most {format_size(MAX_BYTES)}): write the real "
            "figure, e.g. 2.9TB or 500GB"
        )
    return round(size)


def format_size(size: float) -> str:
    """Decimal units, like disk vendors and `df -H`: 5.87 TB."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(size) < 1000 or unit == "PB":
            return f"{size:.0f} B" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def format_hours(hours: float) -> str:
    """Minutes under an hour, hours under two days, then days: 45 min, 9.7 h, 2.9 days."""
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


FIGURE_DIGITS = 3  # what a measured rate or ratio on a person's screen can vouch for: 16.5 tokens/s, 0.827, 1.40x


def figure(value: float, digits: int = FIGURE_DIGITS) -> str:
    """A measured figure to `digits` significant figures (16.460 reads 16.5, 0.82705 reads 0.827), never rounding
    away a whole number's digits (1,234, not 1,230): a screen that shows more digits than the measurement holds
    invites reading noise as a difference."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    exponent = int(f"{abs(value):.{digits - 1}e}".split("e")[1])  # after rounding: 9.996 is 10.0, not 10.00
    return f"{value:,.{max(0, digits - 1 - exponent)}f}"
