"""What a local file the config names really is, said in words. A key_file that is a directory, a FIFO or a link
loop is not "missing", and each needs another fix; reading a FIFO or /dev/zero as a key would hang or never end,
so they are refused before anything opens them."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
MISSING = "does not exist"


def not_a_regular_file(path: Path) -> str | None:
    """None when `path` is a regular file (links followed); else what it is instead, as the end of a sentence
    that starts with the path: 'does not exist', 'is a directory, not a file', 'is a character device, ...'."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link that loops (following it leads back to itself), not a file"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            if path.is_symlink():
                return f"is a symbolic link to {os.readlink(path)}, which {MISSING}"
            return MISSING
        return f"cannot be examined ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kind = next((name for test, name in _SPECIAL if test(mode)), "a special file")
    return f"is {kind}, not a regular file"
