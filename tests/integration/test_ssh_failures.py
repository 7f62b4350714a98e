"""SSH failures as an operator meets them, against a real sshd on 127.0.0.1: a host that cannot be used is
dialled once per command, and each message names the real cause (passphrase, unreadable key, no key at all,
wrong user, a silent port). And a Host of ~/.ssh/config works as an address, jump hosts included."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.verify import VerifyReport, verify
from eyas.tools.errors import AuthFailed, HostKeyUnknown
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.ssh import SSHHost
from eyas.tools.settings.config import HostConfig, TargetConfig
from sshd import SSH_KEYGEN, Sshd

pytestmark = pytest.mark.sshd

# The checks of `eyas verify` that use the host (service reads nothing without a unit configured).
HOST_CHECKS = ["gpus", "disk", "binaries", "packages"]
PASSPHRASE_ENV = "EYAS_TEST_KEY_PASSPHRASE"


def verify_over(host: Host, tmp_path: Path) -> VerifyReport:
    """One `eyas verify` of the host's checks, as the command runs them: concurrently, on one Host."""
    ctx = CheckContext(
        host=host,
        host_config=HostConfig(address="127.0.0.1", python="/usr/bin/python3", workdir=str(tmp_path)),
        target=TargetConfig(base_url="http://127.0.0.1:9", model="any"),  # type: ignore[arg-type]
        http=HttpClient(),
        data_path=str(tmp_path),
    )
    return verify(ctx, HOST_CHECKS)


def failed_with(report: VerifyReport, text: str) -> bool:
    return all(result.status is Status.FAIL and text in result.message for result in report.results)


def sshd_log_count(server: Sshd, line: str) -> int:
    return server.log.read_text().count(line)


# -- item 8: a host that cannot be used is dialled once per command ------------------------------------------


@contextmanager
def black_hole() -> Iterator[tuple[int, socket.socket]]:
    """A port that accepts TCP (the kernel does) and never says a word; yields (port, listener)."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        yield listener.getsockname()[1], listener


def accepted(listener: socket.socket) -> int:
    """How many connections reached the listener: each one waits in its queue, as nobody accepts them."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            listener.accept()[0].close()
        except BlockingIOError:
            return count
        count += 1


def test_a_silent_port_is_dialled_once_per_command_and_the_message_states_the_timeout(tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    with black_hole() as (port, listener):
        host = SSHHost("gpu", "127.0.0.1", port=port, known_hosts=str(known_hosts), connect_timeout=1.0)
        report = verify_over(host, tmp_path)
        assert accepted(listener) == 1
    assert failed_with(report, "within the connect timeout of 1 s")


def test_a_wrong_user_fails_one_login_per_command(sshd: Sshd, tmp_path: Path) -> None:
    before = sshd_log_count(sshd, "Invalid user eyas-no-such-user")
    host = SSHHost(
        "gpu",
        "127.0.0.1",
        port=sshd.port,
        user="eyas-no-such-user",
        key_file=str(sshd.client_key),
        known_hosts=str(sshd.known_hosts),
    )
    report = verify_over(host, tmp_path)
    assert failed_with(report, "refused the login of user 'eyas-no-such-user'")
    assert sshd_log_count(sshd, "Invalid user eyas-no-such-user") == before + 1


def test_close_forgets_a_refused_connect(sshd: Sshd, tmp_path: Path) -> None:
    """The memory lasts for one command: a host closed and used again dials again."""
    host = sshd.host(key_file=tmp_path / "not-yet-there")
    with pytest.raises(AuthFailed, match="cannot be read"):
        host.run("true")
    (tmp_path / "not-yet-there").write_bytes(sshd.client_key.read_bytes())
    with pytest.raises(AuthFailed, match="cannot be read"):
        host.run("true")
    host.close()
    assert host.run("echo back").stdout == "back\n"


# -- item 9: messages that name the real cause ---------------------------------------------------------------


def key_with_passphrase(server: Sshd, path: Path, passphrase: str) -> Path:
    """A key the server accepts, stored encrypted with `passphrase`."""
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True)
    with (server.directory / "authorized_keys").open("a") as keys:
        keys.write(Path(f"{path}.pub").read_text())
    return path


# passphrase in the environment (None: unset), passphrase_env named in the config -> what the error says
PASSPHRASE_CASES = {
    "no passphrase configured": (None, None, "protected by a passphrase"),
    "env var named but unset": (None, PASSPHRASE_ENV, f"{PASSPHRASE_ENV} (key_passphrase_env), which is not set"),
    "wrong passphrase": ("not-it", PASSPHRASE_ENV, f"does not open with the passphrase in {PASSPHRASE_ENV}"),
}


@pytest.mark.parametrize("case", PASSPHRASE_CASES.values(), ids=PASSPHRASE_CASES.keys())
def test_a_key_with_a_passphrase_says_how_to_give_it(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[str | None, str | None, str]
) -> None:
    value, env, message = case
    key = key_with_passphrase(sshd, tmp_path / "locked", "open sesame")
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    if value is not None:
        monkeypatch.setenv(PASSPHRASE_ENV, value)
    host = SSHHost(
        "gpu", "127.0.0.1", port=sshd.port, user=sshd.user, key_file=str(key), key_passphrase_env=env,
        known_hosts=str(sshd.known_hosts),
    )  # fmt: skip
    with pytest.raises(AuthFailed, match="passphrase") as raised:
        host.run("true")
    assert message in str(raised.value) and "refused the login" not in str(raised.value)


def test_a_key_with_a_passphrase_logs_in_with_it_from_the_environment(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = key_with_passphrase(sshd, tmp_path / "locked", "open sesame")
    monkeypatch.setenv(PASSPHRASE_ENV, "open sesame")
    config = HostConfig(
        address="127.0.0.1", port=sshd.port, user=sshd.user, key_file=str(key), key_passphrase_env=PASSPHRASE_ENV,
        known_hosts=str(sshd.known_hosts), python="/usr/bin/python3", workdir=str(tmp_path),
    )  # fmt: skip
    with open_host("gpu", config) as host:
        assert host.run("echo in").stdout == "in\n"


# What a key_file may hold that is not a private key.
NOT_KEYS = {
    "garbage": b"this is not a key\n",
    "empty": b"",
    "a public key": b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEQQdgmIbBuY eyas\n",
    "a cut-off key": b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n",
}


@pytest.mark.parametrize("content", NOT_KEYS.values(), ids=NOT_KEYS.keys())
def test_a_key_file_that_is_no_key_is_named_as_such(sshd: Sshd, tmp_path: Path, content: bytes) -> None:
    key = tmp_path / "id_broken"
    key.write_bytes(content)
    report = verify_over(sshd.host(key_file=key), tmp_path)
    assert failed_with(report, f"{key} for host 'ssh' is not a private key eyas can read")
    assert not any("sshd" in result.message for result in report.results)


def test_no_key_and_no_agent_says_so(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # an empty ~/.ssh
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    host = SSHHost("gpu", "127.0.0.1", port=sshd.port, user=sshd.user, known_hosts=str(sshd.known_hosts))
    with pytest.raises(AuthFailed, match="eyas has no key to log in") as raised:
        host.run("true")
    assert "sshd" not in str(raised.value)


# -- item 9: a Host of ~/.ssh/config as the address ----------------------------------------------------------


def ssh_config_entry(alias: str, server: Sshd, *extra: str) -> str:
    lines = [f"Host {alias}", "    HostName 127.0.0.1", f"    Port {server.port}", f"    User {server.user}"]
    return "\n".join([*lines, f"    IdentityFile {server.client_key}", *extra]) + "\n"


# alias used as the address -> the ssh config; the logins the server sees
SSH_CONFIGS = {
    "direct": ("gpubox", lambda s: ssh_config_entry("gpubox", s), 1),
    "through a jump host": (
        "inner",
        lambda s: ssh_config_entry("jumpbox", s) + ssh_config_entry("inner", s, "    ProxyJump jumpbox"),
        2,
    ),
    "through a jump host written inline": (
        "inner",
        lambda s: (
            ssh_config_entry("inner", s, f"    ProxyJump {s.user}@127.0.0.1:{s.port}")
            + f"Host 127.0.0.1\n    IdentityFile {s.client_key}\n"
        ),
        2,
    ),
}


@pytest.mark.parametrize("case", SSH_CONFIGS.values(), ids=SSH_CONFIGS.keys())
def test_a_host_of_the_ssh_config_works_as_the_address(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: tuple[str, object, int]
) -> None:
    alias, write, logins = case
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(write(sshd))  # type: ignore[operator]
    monkeypatch.setenv("HOME", str(home))
    before = sshd_log_count(sshd, "Accepted publickey")
    config = HostConfig(address=alias, known_hosts=str(sshd.known_hosts), python="/usr/bin/python3", workdir="/tmp")
    with open_host("gpu", config) as host:
        assert host.run("echo through").stdout == "through\n"
    assert sshd_log_count(sshd, "Accepted publickey") == before + logins


def test_the_ssh_config_never_loosens_host_key_checking(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        ssh_config_entry("gpubox", sshd, "    StrictHostKeyChecking no", "    UserKnownHostsFile /dev/null")
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = HostConfig(address="gpubox", known_hosts=str(empty), python="/usr/bin/python3", workdir="/tmp")
    with open_host("gpu", config) as host, pytest.raises(HostKeyUnknown, match="never trusts an unknown key"):
        host.run("true")
