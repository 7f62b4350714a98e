"""Which samples an append-only JSONL output already holds, so a run killed at any moment resumes exactly.

Every line starts with its id (`{"id": ...`, as generate.py writes them), so only the start of a line is
parsed. A last line without its newline was torn by a kill mid-write: it is cut off, and its sample is
made again.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_ID_PREFIX = re.compile(rb'\{"id": ?("(?:[^"\\]|\\.)*")')


def cut_torn_tail(path: Path) -> None:
    """Truncate the file after its last newline (reading backwards in blocks, not the whole file)."""
    with path.open("r+b") as f:
        size = end = f.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            newline = f.read(end - start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end != size:
            f.truncate(end)


def read_done(path: Path) -> set[str]:
    """The ids of the whole lines in `path` (none if it does not exist), after cutting a torn last line."""
    if not path.exists():
        return set()
    cut_torn_tail(path)
    done = set()
    with path.open("rb") as f:
        for line in f:
            match = _ID_PREFIX.match(line)
            done.add(json.loads(match.group(1)) if match else str(json.loads(line)["id"]))
    return done
