"""The operator's notify command (a policy's `notify_command`, e.g. a webhook through curl), run on this machine
like a git hook: the message on stdin and in $EYAS_MESSAGE, and what else the caller names in the environment."""

from __future__ import annotations

import os
import subprocess

NOTIFY_TIMEOUT_S = 60


def send_notice(command: str | None, message: str, env: dict[str, str]) -> None:
    """Run `command` (nothing when None) with `message`; a command that fails or hangs never stops the caller."""
    if not command:
        return
    full = {**os.environ, **env, "EYAS_MESSAGE": message}
    try:
        subprocess.run(["/bin/sh", "-c", command], input=message, text=True, env=full, timeout=NOTIFY_TIMEOUT_S,
                       check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return
