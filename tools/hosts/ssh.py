"""SSHHost: a remote machine over one reused paramiko connection, never trusting unknown host keys."""

from __future__ import annotations

import errno
import posixpath
import select
import shlex
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import paramiko

from eyas.tools.errors import (
    AuthFailed,
    CommandTimeout,
    HostError,
    HostKeyUnknown,
    HostUnreachable,
    RemoteFileNotFound,
)
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import CommandResult, Host, wrap_timeout
from eyas.tools.hosts.ssh_keys import load_key, trust_known_hosts
from eyas.tools.settings.config import SSH_KEEPALIVE_S

T = TypeVar("T")
_CHUNK = 1 << 16
# Remote `timeout` exits 124 when it stopped the command, 137 when it had to SIGKILL it.
_TIMEOUT_RCS = (124, 137)
CONNECT_TIMEOUT_S = 10.0  # each stage of a connect: TCP, the server's greeting, the login
# OpenSSH serves at most MaxSessions (default 10) channels on one connection and refuses more; commands
# beyond this many wait for a free one (the SFTP session holds one more).
_MAX_COMMANDS = 8


class SSHHost(Host):
    def __init__(
        self,
        name: str,
        address: str,
        *,
        port: int = 22,
        user: str | None = None,
        key_file: str | None = None,
        key_passphrase_env: str | None = None,
        known_hosts: str = "~/.ssh/known_hosts",
        connect_timeout: float = CONNECT_TIMEOUT_S,
        keepalive_s: float = SSH_KEEPALIVE_S,
        jump: SSHHost | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """`jump`: the host to tunnel through (ssh's ProxyJump); `key_passphrase_env` names the environment
        variable holding the passphrase of `key_file`."""
        self.name = name
        self.address = address
        self.port = port
        self.user = user
        self.key_file = str(Path(key_file).expanduser()) if key_file else None
        self.key_passphrase_env = key_passphrase_env
        self.known_hosts = str(Path(known_hosts).expanduser())
        self.connect_timeout = connect_timeout
        self.keepalive_s = keepalive_s
        self.jump = jump
        self._clock = clock
        self._client: paramiko.SSHClient | None = None
        # A host that never let eyas in is not dialled again until close(): each retry would wait out the
        # timeout once more, and each failed login counts towards the host's ban (fail2ban, MaxAuthTries).
        self._answered = False
        self._refusal: HostError | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()
        self._sftp_lock = threading.Lock()
        self._command_slots = threading.BoundedSemaphore(_MAX_COMMANDS)

    # -- connection ---------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.address}:{self.port}"

    @property
    def _keyscan(self) -> str:
        """The command that reads the host's key, for the messages that ask a person to record it."""
        return f"ssh-keyscan -p {self.port} {self.address}"

    def _connect(self) -> paramiko.SSHClient:
        if self._refusal is not None:
            raise type(self._refusal)(str(self._refusal))
        try:
            client = self._dial()
        except HostError as exc:
            if not self._answered:
                self._refusal = exc
            raise
        self._answered = True
        return client

    def _dial(self) -> paramiko.SSHClient:
        key = load_key(self.name, self.key_file, self.key_passphrase_env)
        client = paramiko.SSHClient()
        trust_known_hosts(client, self.name, self.known_hosts, self._where, self._keyscan)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                self.address,
                port=self.port,
                username=self.user,
                pkey=key,
                look_for_keys=key is None,
                allow_agent=key is None,
                sock=self.jump.tunnel(self.address, self.port) if self.jump else None,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                channel_timeout=self.connect_timeout,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyUnknown(
                f"The host key of {self._where} does not match the one recorded in {self.known_hosts} "
                f"(got {exc.key.get_name()} {exc.key.fingerprint}). Someone may be intercepting the "
                "connection, or the machine was reinstalled. Confirm with its owner, then remove the old "
                f"line (ssh-keygen -R '[{self.address}]:{self.port}' -f {self.known_hosts}) and add the "
                "new key."
            ) from None
        except paramiko.AuthenticationException:
            client.close()
            raise AuthFailed(
                f"{self._where} refused the login of user '{self.user}' with key "
                f"{self.key_file or '(agent and default keys)'}. Check that the public key is in "
                f"~{self.user or ''}/.ssh/authorized_keys on that host and that 'user' and 'key_file' of "
                f"host '{self.name}' in the config are right."
            ) from None
        except paramiko.SSHException as exc:
            client.close()
            if "No authentication methods available" in str(exc):
                raise AuthFailed(
                    f"eyas has no key to log in to {self._where} with: host '{self.name}' sets no key_file, no "
                    "IdentityFile in ~/.ssh/config exists for it, ssh-agent offers no key (is SSH_AUTH_SOCK set?) "
                    "and ~/.ssh holds no id_* key. Set key_file for the host in the config, or add the key to "
                    "ssh-agent with ssh-add."
                ) from None
            if "not found in known_hosts" in str(exc):
                raise HostKeyUnknown(
                    f"The host key of {self._where} is not in {self.known_hosts}; eyas never trusts an "
                    "unknown key on its own. If this is the right machine, check its fingerprint and add "
                    f"it: {self._keyscan} >> {self.known_hosts}"
                ) from None
            raise HostUnreachable(
                f"The SSH handshake with {self._where} failed within the connect timeout of "
                f"{self.connect_timeout:g} s ({exc or 'no answer'}). Check that sshd, not another service, "
                f"listens on port {self.port}."
            ) from None
        except (OSError, EOFError) as exc:
            client.close()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or "timed out"
            raise HostUnreachable(
                f"Cannot reach host '{self.name}' at {self._where} within {self.connect_timeout:g} s "
                f"({reason}). Check the address and port in the config, that sshd runs there, and the "
                "network path (VPN, firewall)."
            ) from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(max(1, round(self.keepalive_s)))
        return client

    def _live_client(self, *, fresh: bool = False) -> paramiko.SSHClient:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client else None
            if client is None or fresh or transport is None or not transport.is_active():
                self._drop()
                client = self._client = self._connect()
            return client

    def _drop(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _open_channel(self) -> paramiko.Channel:
        """Open a session channel. Opening is a round trip with a deadline, so it doubles as the
        liveness probe: a connection that fails it is replaced once (nothing has run yet)."""
        for attempt in (0, 1):
            client = self._live_client(fresh=attempt == 1)
            transport = client.get_transport()
            try:
                assert transport is not None
                return transport.open_session(timeout=self.connect_timeout)
            except paramiko.ChannelException as exc:
                # The server answered, so the connection is alive: it refused this channel.
                raise HostError(
                    f"{self._where} refused a new SSH session ({exc.text}); its sshd may allow fewer "
                    "sessions per connection (MaxSessions) than eyas uses."
                ) from None
            except (paramiko.SSHException, EOFError, OSError, AssertionError):
                if attempt == 1:
                    raise HostUnreachable(
                        f"The SSH connection to {self._where} is dead and reconnecting did not help. "
                        "Check that the host is up and sshd is running."
                    ) from None
        raise AssertionError("unreachable")

    def probe(self) -> None:
        """Prove the connection is alive now (reconnecting if it is not)."""
        self._open_channel().close()

    def close(self) -> None:
        """Also forgets a refused connect: the next use dials again."""
        with self._lock:
            self._drop()
            self._refusal = None
        if self.jump is not None:
            self.jump.close()

    def tunnel(self, address: str, port: int) -> paramiko.Channel:
        """A TCP stream from this host to address:port, for the next hop to run SSH over (ProxyJump)."""
        transport = self._live_client().get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=self.connect_timeout
            )
        except (paramiko.SSHException, OSError) as exc:
            raise HostUnreachable(
                f"The jump host {self._where} could not open a connection to {address}:{port} ({exc}). Check "
                "that the address is right as seen from the jump host and that its sshd allows TCP forwarding."
            ) from None

    # -- commands -----------------------------------------------------------------------------

    def run(self, command: str, *, timeout: float = 60.0) -> CommandResult:
        with self._command_slots:
            started = self._clock.monotonic()
            channel = self._open_channel()
            try:
                channel.exec_command(wrap_timeout(command, timeout))
                out, err = self._drain(channel, deadline=started + timeout + 30, command=command)
                rc = channel.recv_exit_status()
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise HostUnreachable(
                    f"The SSH connection to {self._where} failed while running a command ({exc or 'closed'}); "
                    f"it may or may not have run there: {command[:200]}"
                ) from None
            finally:
                channel.close()
        if rc == -1:  # the channel closed without an exit status: its sshd or the connection ended mid-command
            raise HostUnreachable(
                f"The SSH connection to {self._where} ended before the command reported how it ended; it may or "
                f"may not have finished there: {command[:200]}"
            )
        duration = self._clock.monotonic() - started
        if rc in _TIMEOUT_RCS and duration >= timeout * 0.99:
            raise CommandTimeout(
                f"The command ran longer than {timeout:.0f} s on {self.name} and was stopped: {command[:200]}"
            )
        return CommandResult(
            host=self.name,
            command=command,
            rc=rc,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=duration,
        )

    def _drain(self, channel: paramiko.Channel, *, deadline: float, command: str) -> tuple[bytes, bytes]:
        """Read stdout and stderr together until the command ends, so neither pipe can fill and block."""
        out, err = bytearray(), bytearray()
        while True:
            while channel.recv_ready():
                out += channel.recv(_CHUNK)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(_CHUNK)
            if channel.exit_status_ready() and (channel.eof_received or channel.closed):
                if not channel.recv_ready() and not channel.recv_stderr_ready():
                    return bytes(out), bytes(err)
                continue
            if self._clock.monotonic() > deadline:
                raise CommandTimeout(
                    f"No end of the command on {self.name} after its timeout; the connection may have "
                    f"died: {command[:200]}"
                )
            transport = channel.get_transport()
            if transport is None or not transport.is_active():
                raise HostUnreachable(
                    f"The SSH connection to {self._where} dropped while running a command; it may or may "
                    f"not have finished there: {command[:200]}"
                )
            select.select([channel], [], [], 0.2)

    # -- files --------------------------------------------------------------------------------

    def _with_sftp(self, action: Callable[[paramiko.SFTPClient], T], path: str) -> T:
        for attempt in (0, 1):
            with self._sftp_lock:
                try:
                    if self._sftp is None or attempt == 1:
                        self._sftp = self._live_client(fresh=attempt == 1).open_sftp()
                        channel = self._sftp.get_channel()
                        if channel is not None:
                            channel.settimeout(max(self.connect_timeout, 60.0))
                    return action(self._sftp)
                except FileNotFoundError:
                    raise RemoteFileNotFound(f"{path} does not exist on {self.name}.") from None
                except (TimeoutError, paramiko.SSHException, EOFError) as exc:
                    if attempt == 1:
                        raise HostError(f"File transfer of {path} with {self._where} failed: {exc}") from None
                except OSError as exc:
                    if exc.errno == errno.ENOENT:
                        raise RemoteFileNotFound(f"{path} does not exist on {self.name}.") from None
                    # A dead connection shows up as an OSError without errno ("Socket is closed"):
                    # reconnect once, as for the errors above. Anything else is about the file.
                    if attempt == 1 or self._sftp_alive():
                        raise HostError(f"File access to {path} on {self.name} failed: {exc}") from None
        raise AssertionError("unreachable")

    def _sftp_alive(self) -> bool:
        channel = self._sftp.get_channel() if self._sftp is not None else None
        transport = channel.get_transport() if channel is not None else None
        return channel is not None and not channel.closed and transport is not None and transport.is_active()

    def read_bytes(self, path: str) -> bytes:
        def read(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(path, "rb") as f:
                f.prefetch()
                return f.read()

        return self._with_sftp(read, path)

    def write_bytes(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        parent = posixpath.dirname(path)
        if parent:
            self.run(f"mkdir -p {shlex.quote(parent)}", timeout=30).check(f"Creating {parent}")
        tmp = f"{path}.eyas-{uuid.uuid4().hex[:8]}"

        def write(sftp: paramiko.SFTPClient) -> None:
            with sftp.open(tmp, "wb") as f:
                f.set_pipelined(True)
                f.write(data)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)

        self._with_sftp(write, path)

    def exists(self, path: str) -> bool:
        def stat(sftp: paramiko.SFTPClient) -> bool:
            sftp.stat(path)
            return True

        try:
            return self._with_sftp(stat, path)
        except RemoteFileNotFound:
            return False
