"""The Host interface: the only way eyas runs a command or moves a file on a machine."""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import TracebackType

from eyas.tools.errors import HostError


@dataclass(frozen=True)
class CommandResult:
    """What a command did: exit code, both streams in full, and how long it took."""

    host: str
    command: str
    rc: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def check(self, doing: str) -> CommandResult:
        """Return self when the command succeeded, else raise an error naming what failed."""
        if self.rc != 0:
            tail = (self.stderr.strip() or self.stdout.strip())[-600:]
            raise HostError(f"{doing} failed on {self.host} (exit {self.rc}): {tail or 'no output'}")
        return self


class Host(ABC):
    """A machine eyas acts on. Commands run in `/bin/sh -c` of a non-interactive, non-login shell,
    so they see the PATH a detached job will see, not the one of the operator's terminal."""

    name: str

    @abstractmethod
    def run(self, command: str, *, timeout: float = 60.0) -> CommandResult:
        """Run a shell command; raise CommandTimeout when it runs longer than `timeout` seconds."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Read a whole file; raise RemoteFileNotFound when it does not exist."""

    @abstractmethod
    def write_bytes(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write a whole file atomically (temp file, then rename), creating parent directories."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    def close(self) -> None:  # noqa: B027 - most hosts hold nothing to release
        """Release connections; the host reconnects on its next use."""

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def write_text(self, path: str, text: str, *, mode: int = 0o644) -> None:
        self.write_bytes(path, text.encode("utf-8"), mode=mode)

    def which(self, program: str) -> str | None:
        """Where a non-interactive shell on this host finds `program`, or None."""
        result = self.run(f"command -v {shlex.quote(program)}", timeout=15)
        found = result.stdout.strip()
        return found if result.ok and found.startswith("/") else None

    def __enter__(self) -> Host:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def wrap_timeout(command: str, timeout: float) -> str:
    """Bound a command on the host itself, so it ends even when the controller is gone."""
    seconds = max(1, int(timeout + 0.999))
    return f"timeout -k 5 {seconds} /bin/sh -c {shlex.quote(command)}"
