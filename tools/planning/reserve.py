"""What a plan leaves free on the data volume, scaled to the volume.

A fixed 10 GB is right for a small disk and too little for a large one: on a 2.9 TB volume the same run also writes
logs that grow with its hours, checkpoint files written beside the previous one before it is replaced (a drafter's
state with its optimiser is several GB), the temporary files of a conversion, and whatever else shares the volume
keeps growing while the run takes its days. A share of the free bytes grows with those; a floor keeps a small disk
from being planned to its last gigabyte, and a ceiling keeps a very large volume from idling terabytes for nothing.
"""

from __future__ import annotations

RESERVE_FLOOR_BYTES = 10 * 1000**3  # never less: logs, a checkpoint's temporary copy, the tools' own caches
RESERVE_SHARE = 0.02  # of the free bytes: 58 GB of a 2.9 TB volume
RESERVE_CEILING_BYTES = 200 * 1000**3  # enough for several checkpoints' temporary copies on the largest volumes


def disk_reserve_bytes(free_bytes: int) -> int:
    """Bytes a plan must leave free on a volume with `free_bytes` free: 2% of them, at least 10 GB, at most 200 GB."""
    share = int(max(free_bytes, 0) * RESERVE_SHARE)
    return min(max(share, RESERVE_FLOOR_BYTES), RESERVE_CEILING_BYTES)
