"""Owner-only folders and files: a run's folder holds its plans, transcripts, answers and logs, which name hosts,
paths and what the operator decided, so no other user of the machine reads them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> Path:
    """`path` as an owner-only folder when this call creates it; an existing folder keeps its mode."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    return path


def _owner_only(path: str, flags: int) -> int:
    return os.open(path, flags, PRIVATE_FILE)


def open_private(path: Path, mode: str) -> IO[Any]:
    """open(), except that a file it creates is owner-only from the start, never readable for a moment."""
    return open(path, mode, opener=_owner_only)


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` at once (through a temporary file), owner-only."""
    tmp = path.with_name(path.name + ".tmp")
    with open_private(tmp, "w") as f:
        f.write(text)
    tmp.replace(path)


def touch_private(path: Path) -> Path:
    """Create `path` empty and owner-only if it is missing (for files another library opens, e.g. SQLite's)."""
    with open_private(path, "a"):
        return path
