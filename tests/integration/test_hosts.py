"""Hosts against real parts: the same suite over LocalHost and over SSHHost to a real sshd on 127.0.0.1."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eyas.tools.errors import AuthFailed, CommandTimeout, HostKeyUnknown, HostUnreachable, RemoteFileNotFound
from eyas.tools.hosts.host import Host
from sshd import Sshd, free_port, generate_key, known_hosts_line
from waiting import process_gone, wait_for

# -- both hosts ---------------------------------------------------------------------------------


def test_run_returns_rc_and_both_streams_separately(host: Host) -> None:
    """A command's exit code, stdout and stderr come back apart and complete."""
    result = host.run("echo out; echo err >&2; printf 'no newline'")
    assert (result.rc, result.stdout, result.stderr) == (0, "out\nno newline", "err\n")
    assert result.ok
    assert result.host == host.name
    assert result.duration_s >= 0


def test_nonzero_exit_code_is_returned_not_raised(host: Host) -> None:
    """A failing command is a result with its rc; check() turns it into an error naming what failed."""
    result = host.run("echo broken >&2; exit 7")
    assert (result.rc, result.stderr) == (7, "broken\n")
    with pytest.raises(Exception, match=r"Frobbing failed .*exit 7.*broken"):
        result.check("Frobbing")


def test_large_output_on_both_streams_does_not_deadlock(host: Host) -> None:
    """8 MiB on stdout and 8 MiB on stderr written at the same time arrive in full, without a hang."""
    size = 8 << 20
    command = f"(head -c {size} /dev/zero | tr '\\0' o) & (head -c {size} /dev/zero | tr '\\0' e) >&2; wait"
    result = host.run(command, timeout=60)
    assert result.rc == 0
    assert len(result.stdout) == size and set(result.stdout) == {"o"}
    assert len(result.stderr) == size and set(result.stderr) == {"e"}


def test_timeout_raises_and_kills_the_command(host: Host, workdir: str) -> None:
    """A command past its timeout raises CommandTimeout promptly, and its processes are gone afterwards."""
    pids = Path(workdir) / "pids"
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="longer than"):
        host.run(f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; wait", timeout=1.5)
    assert time.monotonic() - started < 10
    recorded = [int(line) for line in pids.read_text().split()]
    assert len(recorded) == 2  # the shell and its child
    for pid in recorded:
        wait_for(lambda pid=pid: process_gone(pid), 5, what=f"process {pid} to end")


def test_write_and_read_bytes_round_trip(host: Host, workdir: str) -> None:
    """5 MB of binary data survive a write and a read; missing parent directories are created."""
    data = os.urandom(5_000_000)
    path = f"{workdir}/new/deeper/blob.bin"
    host.write_bytes(path, data, mode=0o600)
    assert host.read_bytes(path) == data
    assert os.stat(path).st_mode & 0o777 == 0o600
    host.write_text(path, "replaced ✓")
    assert host.read_text(path) == "replaced ✓"
    assert sorted(os.listdir(f"{workdir}/new/deeper")) == ["blob.bin"]  # no temp file left behind


def test_read_of_missing_file_names_the_path(host: Host, workdir: str) -> None:
    """Reading a file that does not exist raises RemoteFileNotFound with the path in the message."""
    path = f"{workdir}/no/such/file.txt"
    with pytest.raises(RemoteFileNotFound, match=re.escape(path)):
        host.read_bytes(path)


def test_exists(host: Host, workdir: str) -> None:
    """exists() is true for files and directories, false for a missing path."""
    Path(workdir, "present").write_text("x")
    assert host.exists(f"{workdir}/present")
    assert host.exists(workdir)
    assert not host.exists(f"{workdir}/absent")


def test_which_finds_programs_and_returns_none_otherwise(host: Host) -> None:
    """which() gives an absolute path the shell would run, or None for a program that is not there."""
    found = host.which("sh")
    assert found is not None and os.path.samefile(found, "/bin/sh")
    assert host.which("eyas-no-such-program") is None


def test_commands_see_the_non_interactive_shell_path(host: Host, workdir: str) -> None:
    """Commands run in a non-interactive /bin/sh -c: a tool only on a venv's bin dir is not on PATH."""
    result = host.run('echo "$-"; echo "$PATH"; /bin/sh -c \'echo "$PATH"\'')
    flags, path, nested_path = result.stdout.splitlines()
    assert "i" not in flags
    assert path and path == nested_path
    tool = Path(workdir, "venv", "bin", "mytool")
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    assert host.which("mytool") is None
    assert host.run("mytool").rc == 127
    assert host.run(str(tool)).stdout == "tool ran\n"


# -- SSH only -----------------------------------------------------------------------------------


@pytest.fixture
def own_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """A server of this test's own, for tests that restart it."""
    server = Sshd(tmp_path_factory.mktemp("own-sshd"))
    server.start()
    yield server
    server.stop()


def _logins(server: Sshd) -> int:
    return server.log.read_text().count("Accepted publickey")


@pytest.mark.sshd
def test_reconnects_after_sshd_restart(own_sshd: Sshd, workdir: str) -> None:
    """The same SSHHost keeps working, for commands and files, after the server restarted."""
    with own_sshd.host() as host:
        host.write_bytes(f"{workdir}/before", b"1")
        assert host.run("echo before").stdout == "before\n"
        # File access first after each restart: the SFTP session died with the connection.
        own_sshd.restart()
        assert host.read_bytes(f"{workdir}/before") == b"1"
        assert host.run("echo after").stdout == "after\n"
        own_sshd.restart()
        assert host.exists(f"{workdir}/before")
        host.write_bytes(f"{workdir}/after", b"2")
        own_sshd.restart()
        assert host.run(f"cat {workdir}/after").stdout == "2"


@pytest.mark.sshd
def test_a_command_whose_sshd_ends_mid_run_is_an_outage_not_a_failed_command(own_sshd: Sshd, workdir: str) -> None:
    """sshd ending under a running command closes its channel without an exit status: that is the host being
    unreachable (which the monitor waits out), not a command that failed (which ended a whole run)."""
    started = Path(workdir) / "started"
    with own_sshd.host() as host:
        running = ThreadPoolExecutor(max_workers=1).submit(host.run, f"touch {started} && sleep 60", timeout=120)
        wait_for(started.exists, timeout=30, what="the command running over SSH")
        own_sshd.stop()
        with pytest.raises(HostUnreachable, match="ended before the command reported how it ended"):
            running.result(timeout=60)
        own_sshd.start()
        assert host.run("echo back").stdout == "back\n"


@pytest.mark.sshd
def test_one_connection_serves_many_commands(sshd: Sshd) -> None:
    """Commands reuse one SSH connection: one login, one transport."""
    logins = _logins(sshd)
    with sshd.host() as host:
        host.run("true").check("first command")
        transport = host._client.get_transport() if host._client else None
        for i in range(10):
            assert host.run(f"echo {i}").stdout == f"{i}\n"
        assert host._client is not None and host._client.get_transport() is transport
    assert _logins(sshd) == logins + 1


@pytest.mark.sshd
@pytest.mark.parametrize("content", ["empty", "other-host"])
def test_unknown_host_key_is_refused(sshd: Sshd, tmp_path: Path, content: str) -> None:
    """A server whose key is not in known_hosts is refused, with the ssh-keyscan command to fix it."""
    known_hosts = tmp_path / "known_hosts"
    other = "" if content == "empty" else f"[127.0.0.2]:{sshd.port} {sshd.host_public_key_line}\n"
    known_hosts.write_text(other)
    with pytest.raises(HostKeyUnknown, match=rf"ssh-keyscan -p {sshd.port} 127\.0\.0\.1"):
        sshd.host(known_hosts=known_hosts).run("true")


@pytest.mark.sshd
@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa"])
def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path, key_type: str) -> None:
    """known_hosts listing another key for [127.0.0.1]:port (same or other type) is a mismatch error."""
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(tmp_path / "other")], check=True)
    other_key = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(known_hosts_line(sshd.port, other_key))
    with pytest.raises(HostKeyUnknown, match="does not match"):
        sshd.host(known_hosts=known_hosts).run("true")


@pytest.mark.sshd
def test_missing_known_hosts_file_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    """Without a known_hosts file nothing can be authenticated: HostKeyUnknown, naming the file."""
    missing = tmp_path / "nowhere" / "known_hosts"
    with pytest.raises(HostKeyUnknown, match=re.escape(str(missing))):
        sshd.host(known_hosts=missing).run("true")


@pytest.mark.sshd
def test_refused_key_is_auth_failed(sshd: Sshd, tmp_path: Path) -> None:
    """A client key that is not in authorized_keys raises AuthFailed naming the key file."""
    stranger = tmp_path / "stranger"
    generate_key(stranger)
    with pytest.raises(AuthFailed, match=re.escape(str(stranger))):
        sshd.host(key_file=stranger).run("true")


@pytest.mark.sshd
def test_closed_port_is_unreachable(sshd: Sshd) -> None:
    """Nothing listening on the port: HostUnreachable at once."""
    started = time.monotonic()
    with pytest.raises(HostUnreachable, match="Cannot reach"):
        sshd.host(port=free_port(), connect_timeout=2).run("true")
    assert time.monotonic() - started < 2


@pytest.mark.sshd
def test_silent_listener_is_unreachable_within_the_connect_timeout(sshd: Sshd) -> None:
    """A port that accepts TCP but never sends the SSH banner fails within the connect timeout."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever answers
        started = time.monotonic()
        with pytest.raises(HostUnreachable, match="SSH handshake"):
            sshd.host(port=silent.getsockname()[1], connect_timeout=1.5).run("true")
        elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 5


@pytest.mark.sshd
def test_concurrent_commands_share_one_host(sshd: Sshd, workdir: str) -> None:
    """16 threads (more than sshd's default MaxSessions of 10) run commands over one SSHHost at once."""
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = host.run(f"sleep 0.3; echo {i}", timeout=30).stdout
        except BaseException as exc:
            errors.append(exc)

    logins = _logins(sshd)
    with sshd.host() as host:
        host.write_bytes(f"{workdir}/opened", b"")  # the SFTP session holds one more channel
        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert errors == []
    assert results == {i: f"{i}\n" for i in range(16)}
    assert _logins(sshd) == logins + 1
