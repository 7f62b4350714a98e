"""A SQLite database opened for reading only, so that looking at a run never creates, repairs or grows a file.

`mode=ro` still needs the write-ahead log's `-shm` index: SQLite creates it when it is missing, which fails on a
read-only or full filesystem (a "disk I/O error"). A database closed cleanly has no `-wal` file, so everything is in
the main file and it can be opened `immutable`, which needs no index at all; with a `-wal` file left, `mode=ro` is
the only right way (the log holds committed pages), and SQLite's own error stands.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect_read_only(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    try:
        connection = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=check_same_thread)
        connection.execute("PRAGMA schema_version").fetchone()  # opening is lazy: make it read now
        return connection
    except sqlite3.OperationalError:
        wal = path.with_name(path.name + "-wal")
        if wal.exists() and wal.stat().st_size:
            raise
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=check_same_thread)
