"""Which eyas made a result: its version, and the git commit of the checkout it runs from, so that a run's
evaluation can be traced to the code that produced it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import eyas

_ROOT = Path(eyas.__file__).resolve().parent


def eyas_build() -> dict[str, str | None]:
    """{"version", "commit"}; the commit is None when eyas is installed from a wheel (no checkout), and ends in
    "+dirty" when the checkout has uncommitted changes."""
    return {"version": eyas.__version__, "commit": _commit()}


def _commit() -> str | None:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(_ROOT), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    if git("rev-parse", "--show-toplevel") != str(_ROOT):
        return None  # not a checkout of eyas itself (a wheel inside some other repository)
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
