"""Shared fixtures: a real sshd on 127.0.0.1, both kinds of Host, a scratch work directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.tools.host import Host
from eyas.tools.local_host import LocalHost
from sshd import Sshd


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One OpenSSH server for the whole session (needs `apt-get install openssh-server`)."""
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.sshd)])
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    """The same machine twice: directly, and over SSH through the test sshd."""
    if request.param == "local":
        chosen: Host = LocalHost()
    else:
        chosen = request.getfixturevalue("sshd").host()
    yield chosen
    chosen.close()


@pytest.fixture
def workdir(tmp_path: Path) -> str:
    """A fresh directory on this machine, which is also the SSH host."""
    return str(tmp_path)
