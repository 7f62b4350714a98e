"""A clock whose time moves only when slept through, and which remembers every sleep: retries and rate limits are
tested by the waits they ask for, and no test waits for real."""

from __future__ import annotations

from eyas.tools.hosts.clock import Clock

EPOCH_AT_START = 1_700_000_000.0  # the wall-clock time at the virtual start (2023-11-14 22:13:20 UTC)


class VirtualClock(Clock):
    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return EPOCH_AT_START + self.t - 1000.0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.t += seconds
