"""The one place eyas reads time or waits, so a replay can substitute a virtual clock."""

from __future__ import annotations

import time


class Clock:
    """Wall clock and sleeps; a replaying clock subclasses it and returns recorded values."""

    def now(self) -> float:
        """Seconds since the epoch (for timestamps a person reads)."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (for deadlines and durations)."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = Clock()
