"""A real OpenSSH server on 127.0.0.1 for tests: its own config, keys and known_hosts in a temp dir.

Needs Debian's `openssh-server` (which brings `openssh-sftp-server`). The server runs in the
foreground (`sshd -D -e`) as a child of the test process and logs to `<directory>/sshd.log`.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from eyas.tools.hosts.ssh import SSHHost

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "/usr/bin/ssh-keygen"
_SFTP_SERVERS = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
    "/usr/lib/ssh/sftp-server",
)
# Newer OpenSSH (9.8+) refuses a source address for a while after failed logins; the tests fail
# logins on purpose, from 127.0.0.1, so this is switched off where the server knows the option.
_OPTIONAL_LINES = ("PerSourcePenalties no",)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def known_hosts_line(port: int, public_key_line: str) -> str:
    """A known_hosts entry for 127.0.0.1 on a non-standard port, as ssh-keyscan writes it."""
    return f"[127.0.0.1]:{port} {public_key_line}\n"


def generate_key(path: Path) -> str:
    """Create an ed25519 key pair at `path` (and `path`.pub); return the public key as `type base64`."""
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "eyas-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    key_type, blob, *_ = Path(f"{path}.pub").read_text().split()
    return f"{key_type} {blob}"


def _children(pid: int, *, deep: bool = True) -> list[int]:
    """Pids of the live children of `pid`, or of all its live descendants (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, ppid in parents.items() if ppid == parent]
        found += kids
        if deep:
            frontier += kids
    return found


class Sshd:
    """One OpenSSH server for the user running the tests, reachable with `client_key`.

    `host_public_key_line` is the server's public key as `ssh-ed25519 AAAA...`; `known_hosts` holds it
    for `[127.0.0.1]:port`. `restart()` keeps port and host key, so existing clients may reconnect.
    """

    def __init__(self, directory: Path, *, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.user = getpass.getuser()
        self.config = directory / "sshd_config"
        self.log = directory / "sshd.log"
        self.pid_file = directory / "sshd.pid"
        self.client_key = directory / "client_key"
        self.known_hosts = directory / "known_hosts"
        self._authorized_keys = directory / "authorized_keys"
        self._host_key = directory / "host_key"
        self._process: subprocess.Popen[bytes] | None = None
        self.host_public_key_line = ""

    # -- setup ----------------------------------------------------------------------------------

    def _prepare(self) -> None:
        if not Path(SSHD).exists():
            raise RuntimeError(f"{SSHD} is missing: install it with `apt-get install -y openssh-server`.")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host_public_key_line = generate_key(self._host_key)
        client_public = generate_key(self.client_key)
        self._authorized_keys.write_text(client_public + "\n")
        self.known_hosts.write_text(known_hosts_line(self.port, self.host_public_key_line))
        sftp = next((path for path in _SFTP_SERVERS if Path(path).exists()), "internal-sftp")
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self._host_key}",
            f"PidFile {self.pid_file}",
            f"AuthorizedKeysFile {self._authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "UseDNS no",
            f"Subsystem sftp {sftp}",
        ]
        self.config.write_text("\n".join(lines) + "\n")
        for optional in _OPTIONAL_LINES:
            candidate = self.config.read_text() + optional + "\n"
            trial = self.directory / "sshd_config.trial"
            trial.write_text(candidate)
            if subprocess.run([SSHD, "-t", "-f", str(trial)], capture_output=True).returncode == 0:
                self.config.write_text(candidate)
            trial.unlink()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> None:
        """Start the server (generating keys and config the first time) and wait until it answers."""
        if not self.config.exists():
            self._prepare()
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Poll until the server sends its SSH banner on the port, or fail with its log."""
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"sshd exited with {self._process.returncode}:\n{self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
                    if sock.recv(256).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not answer on port {self.port} in {timeout} s:\n{self.log.read_text()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the listener and every connection it serves, by pid, as a crash or reboot would."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        # Per-connection sshd processes run in sessions of their own; end them too, so clients see
        # their connection drop instead of living on after the "restart".
        for pid in [process.pid, *_children(process.pid)]:
            try:
                if pid == process.pid or Path(f"/proc/{pid}/comm").read_text().strip().startswith("sshd"):
                    os.kill(pid, signal.SIGTERM)
            except (ProcessLookupError, FileNotFoundError):
                pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Stop and start again on the same port with the same host key."""
        self.stop()
        self.start()

    def connections(self) -> set[int]:
        """Pids of the sshd processes serving the connections open now (one per client connection)."""
        return set(_children(self._process.pid, deep=False)) if self._process is not None else set()

    # -- clients --------------------------------------------------------------------------------

    def host(
        self,
        name: str = "ssh",
        *,
        key_file: Path | str | None = None,
        known_hosts: Path | str | None = None,
        port: int | None = None,
        connect_timeout: float = 5.0,
    ) -> SSHHost:
        """An SSHHost for this server; the arguments replace the matching parts (for failure tests)."""
        return SSHHost(
            name,
            "127.0.0.1",
            port=port or self.port,
            user=self.user,
            key_file=str(key_file or self.client_key),
            known_hosts=str(known_hosts or self.known_hosts),
            connect_timeout=connect_timeout,
        )
