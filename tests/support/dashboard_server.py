"""`eyas ui` as a real process (uvicorn on a free port of 127.0.0.1) over a runs folder, its token given through
the environment, and a client logged in to it."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from waiting import wait_for

EYAS = str(Path(sys.executable).parent / "eyas")
TOKEN = "ui-test-" + secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Dashboard:
    url: str
    pid: int
    output: Path  # the process's stdout and stderr
    token: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, follow_redirects=False, timeout=30)

    def logged_in(self) -> httpx.Client:
        client = self.client()
        assert client.post("/login", data={"token": self.token}).status_code == 303
        return client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str) -> bool:
    try:
        return httpx.get(url + "/login", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def dashboard(runs: Path, log: Path, token: str | None = TOKEN) -> Iterator[Dashboard]:
    """The dashboard with `token` in $EYAS_UI_TOKEN; with None, the one it makes and prints."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "EYAS_UI_TOKEN"}
    env.update({"EYAS_RUNS_DIR": str(runs)} | ({"EYAS_UI_TOKEN": token} if token else {}))
    with log.open("w") as out:
        process = subprocess.Popen([EYAS, "ui", "--port", str(port)], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(url) or process.poll() is not None, timeout=60, what="the dashboard to answer")
        assert process.poll() is None, log.read_text()
        yield Dashboard(url, process.pid, log, token or printed_token(log.read_text()))
    finally:
        process.terminate()
        process.wait(timeout=30)


def form_value(html: str, name: str) -> str:
    """The value of the page's first hidden input called `name` (the CSRF token, the gate id)."""
    found = re.search(rf'name="{re.escape(name)}" value="([^"]*)"', html)
    assert found is not None, f"no {name} in the page"
    return found.group(1)


def printed_token(output: str) -> str:
    found = re.findall(r"^Log in with this token .*: (\S+)$", output, flags=re.MULTILINE)
    assert len(found) == 1, output
    return str(found[0])
