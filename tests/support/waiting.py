"""Synchronisation for tests: poll a condition with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, *, interval: float = 0.05, what: str = "condition") -> T:
    """Return the first truthy value of `predicate()`; fail the test if none comes within `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value: {value!r})")
        time.sleep(interval)


def process_gone(pid: int) -> bool:
    """True when `pid` no longer runs on this machine: absent, or a zombie nobody reaped.

    PID 1 in the test containers does not reap orphans, so a killed process can stay a zombie;
    `kill -0` would still succeed for it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")
