"""A SQLite database eyas writes (a run's checkpoints, a chat's), and what a write that the disk refuses means.

SQLite does not pass on the OS's errno: a full filesystem reads as "database or disk is full" or, when the
write-ahead log's index cannot grow, "disk I/O error"; a read-only one as "attempt to write a readonly database" or
"disk I/O error". The filesystem that holds the file says which it is, so the refusal comes out as the OSError a
plain write would have raised, naming the file, and the command line says it as a storage problem (cli/main.py).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eyas.tools.private_files import touch_private

# Primary result codes (the low byte of an extended one): the writes a full or read-only disk makes SQLite refuse.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL = 8, 10, 13
_NEARLY_FULL_BYTES = 1 << 20  # less free than this, and a write of a few pages may not fit


def storage_error(error: sqlite3.Error, path: Path) -> OSError | None:
    """The OSError behind SQLite's refusal to write `path`, read from its filesystem; None when the disk is not why
    (a corrupt file, a lock, a failing disk: SQLite's own error says more)."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    if code not in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL):
        return None
    where = path.resolve()  # SQLite follows a link: its log lies beside the file linked to
    try:
        disk = os.statvfs(where.parent)
    except OSError:
        return None
    if disk.f_flag & os.ST_RDONLY:
        number = errno.EROFS
    elif code == _SQLITE_FULL or disk.f_bavail * disk.f_frsize < _NEARLY_FULL_BYTES:
        number = errno.ENOSPC
    elif code == _SQLITE_READONLY:
        number = errno.EACCES
    else:
        return None
    return OSError(number, os.strerror(number), str(where))


@contextmanager
def writable_db(path: Path) -> Iterator[sqlite3.Connection]:
    """`path` opened for writing, created owner-only (SQLite gives its -wal and -shm files the file's mode); a
    write the disk refuses leaves as the OSError behind it (`storage_error`)."""
    connection = sqlite3.connect(touch_private(path), check_same_thread=False)
    try:
        yield connection
    except sqlite3.OperationalError as error:
        refused = storage_error(error, path)
        if refused is None:
            raise
        raise refused from error
    finally:
        connection.close()
