"""Proof that a block of code reached nothing: no socket connected, no process started.

Python's audit hooks see every `socket.connect` and `subprocess.Popen` of this interpreter (httpx,
paramiko and subprocess all go through them). A hook cannot be removed, so one hook is installed once
and only counts while a `world_watch()` block is open.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_WATCHED = {"socket.connect", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"}
_lock = threading.Lock()
_sinks: list[list[str]] = []
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in _WATCHED and _sinks:
        with _lock:
            for sink in _sinks:
                sink.append(f"{event} {args[:2]!r}")


@contextmanager
def world_watch() -> Iterator[list[str]]:
    """Collect every attempt to reach the world made inside the block (from any thread)."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        attempts: list[str] = []
        _sinks.append(attempts)
    try:
        yield attempts
    finally:
        with _lock:
            _sinks.remove(attempts)
