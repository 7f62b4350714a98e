"""A CPU burner started half-way through an evaluation, and which of each server's prompts it loaded: a change of
load mid-measurement must fall on every server alike, or it shows up as speedup (issue 38). evaluate.py's progress
lines drive it, read as they come."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections import Counter
from types import TracebackType
from typing import Any

from eyas.tools.workloads.progress import TAG


class HalfWayBurner:
    """Starts a process that burns a core once the interleaved measurement reports half its prompts done, and stops
    it on exit. `started` is on the clock of the progress lines' "time"."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def see(self, line: str) -> None:
        if self.process is not None or not line.startswith(TAG):
            return
        progress = json.loads(line[len(TAG) :])
        if progress.get("phase") == "interleaved" and progress["done"] == progress["total"] // 2:
            self.process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            self.started = time.time()

    def __enter__(self) -> HalfWayBurner:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def exposure(lines: list[dict[str, Any]], burner_started: float) -> dict[str, Counter[str]]:
    """Per server, how many of its prompts ran on a quiet machine, under the burner, or across its start. A progress
    line with tokens_per_s reports prompts that ran after the line before it (warm-ups and scrapes included), so that
    span, against the burner's start, says which."""
    found: dict[str, Counter[str]] = {}
    for before, line in itertools.pairwise(lines):
        load = "quiet" if line["time"] < burner_started else "loaded" if before["time"] > burner_started else "mixed"
        for server in line.get("tokens_per_s", {}):
            found.setdefault(server, Counter())[load] += 1
    return found
