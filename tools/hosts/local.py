"""LocalHost: the machine eyas runs on (the embedded default, and CI)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from eyas.tools.errors import CommandTimeout, RemoteFileNotFound
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import CommandResult, Host


class LocalHost(Host):
    def __init__(self, name: str = "local", clock: Clock = SYSTEM_CLOCK) -> None:
        self.name = name
        self._clock = clock

    def run(self, command: str, *, timeout: float = 60.0) -> CommandResult:
        started = self._clock.monotonic()
        # Own process group, so a timeout kills the command's children too.
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # The group may have ended on its own since the timeout fired.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise CommandTimeout(
                f"The command ran longer than {timeout:.0f} s on {self.name} and was killed: {command[:200]}"
            ) from None
        return CommandResult(
            host=self.name,
            command=command,
            rc=proc.returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=self._clock.monotonic() - started,
        )

    def read_bytes(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise RemoteFileNotFound(f"{path} does not exist on {self.name}.") from None

    def write_bytes(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def exists(self, path: str) -> bool:
        return Path(path).exists()
