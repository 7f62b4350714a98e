"""Drive a real terminal program through a pseudo-terminal (stdlib pty; pexpect is not a dependency)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time


class Terminal:
    """A child process whose stdin, stdout and stderr are a pty, as when a person runs it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, columns: int | None = None) -> None:
        self._master, slave = os.openpty()
        if columns is not None:  # the window size a terminal of that width reports (rows, columns, pixels)
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        os.close(slave)
        self.output = ""
        self._seen = 0

    def expect(self, pattern: str, timeout: float) -> re.Match[str]:
        """Wait for `pattern` (a regex) in the output after the previous match; fail with the output so far."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = compiled.search(self.output, self._seen)
            if match:
                self._seen = match.end()
                return match
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout} s; the terminal shows:\n{self.output}")
            ready, _, _ = select.select([self._master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self._master, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(
                        f"the program exited ({self.proc.returncode}) before {pattern!r}:\n{self.output}"
                    )
                self.output += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")

    def read_to_end(self, timeout: float) -> int:
        """Everything the program shows until it exits (into `output`); its exit status."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the program did not exit within {timeout} s; it shows:\n{self.output}")
            ready, _, _ = select.select([self._master], [], [], remaining)
            try:
                chunk = os.read(self._master, 65536) if ready else b""
            except OSError:  # the child closed the terminal: all it wrote has been read
                chunk = b""
            if ready and not chunk:
                return self.proc.wait(timeout=remaining)
            self.output += chunk.decode("utf-8", errors="replace").replace("\r\n", "\n")

    def send(self, line: str) -> None:
        os.write(self._master, (line + "\n").encode())

    def close(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        os.close(self._master)
        return code
