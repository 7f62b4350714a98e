"""What a local file the config names really is, said in words. A key_file that is a directory, a FIFO or a link
loop is not "missing", and each needs another fix; reading a FIFO or /dev/zero as a key would hang or never end,
so they are refused before anything opens them. `read_text_file` is the same refusal for a file read as text
(a policy, a known_hosts file)."""

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


class UnreadableFile(Exception):
    """A file eyas reads as text is none: `problem` ends a sentence that starts with the path."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def read_text_file(path: Path) -> str:
    """The UTF-8 text of a regular file; UnreadableFile, saying what it is instead, before a FIFO or /dev/zero is
    opened (a read would wait for a writer, or never end) and for bytes that are not text."""
    problem = not_a_regular_file(path)
    if problem is None:
        try:
            return path.read_bytes().decode()
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        except UnicodeDecodeError as exc:
            problem = f"is not text (not UTF-8 at byte {exc.start})"
    raise UnreadableFile(problem)
