"""verify and plan wait for a production server that is still loading, with a progress line, until it is healthy
or target.load_wait_s has passed, and say which happened; a server that is down (no process) is not waited for.

The production process is real (a unit file's ExecStart, found as the stand-in for systemd finds it); the server
is the scripted HTTP stand-in of tests/support/stub_http.py answering /health with 503 while "loading", since a real
vLLM
cannot be held mid-load on demand; time is a stand-in clock whose sleep moves the server to its next stage."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.phases.verify.node import verify_node
from eyas.graph.runs import RunDir
from eyas.tools.checks.health import check_health
from eyas.tools.checks.loading import wait_until_loaded
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from stub_http import HEALTHY, MODEL, stub_server


class StageClock(Clock):
    """Stand-in for time: a sleep passes at once and runs the server's next stage, if any."""

    def __init__(self, stages: list[Callable[[], None]]) -> None:
        self.time = 1000.0
        self.stages = stages
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.time

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += seconds
        self.slept.append(seconds)
        if self.stages:
            self.stages.pop(0)()


@pytest.fixture
def unit(tmp_path: Path) -> Iterator[Path]:
    """A unit whose ExecStart runs now: production's main process is alive, as while vLLM loads."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    path = tmp_path / "prod.service"
    path.write_text(f"[Service]\nExecStart={shlex.join(argv)}\n")
    process = subprocess.Popen(argv)
    try:
        yield path
    finally:
        process.kill()
        process.wait()


def target(url: str, unit: Path, wait_s: float) -> TargetConfig:
    return TargetConfig(base_url=url, model=MODEL, unit_file=str(unit), load_wait_s=wait_s, generation_deadline_s=5)


def checks(tmp_path: Path, url: str, unit: Path, wait_s: float = 25.0) -> CheckContext:
    return CheckContext(
        host=LocalHost(), host_config=HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path)),
        target=target(url, unit, wait_s), http=HttpClient(), data_path=str(tmp_path),
    )  # fmt: skip


def test_a_loading_server_is_waited_for_until_healthy(tmp_path: Path, unit: Path) -> None:
    routes = {"GET /health": (503, "loading")}
    with stub_server(routes) as url:
        ctx = checks(tmp_path, url, unit)
        clock = StageClock([lambda: None, lambda: routes.update(HEALTHY)])
        lines: list[str] = []
        waited = wait_until_loaded(ctx, check_health(ctx), clock, lines.append)
    assert waited.outcome == "healthy" and waited.result.status is not Status.FAIL
    assert waited.waited_s == 20 and clock.slept == [10, 10]
    assert lines == [
        f"the server at {url} is still loading: waited 0 s of at most 25 s",
        f"the server at {url} is still loading: waited 10 s of at most 25 s",
    ]
    assert waited.note == "the server finished loading after 20 s of waiting and is healthy"


def test_the_wait_ends_at_the_deadline_and_says_so(tmp_path: Path, unit: Path) -> None:
    with stub_server({"GET /health": (503, "loading")}) as url:
        ctx = checks(tmp_path, url, unit)
        clock = StageClock([])
        waited = wait_until_loaded(ctx, check_health(ctx), clock, lambda line: None)
    assert waited.outcome == "deadline" and clock.slept == [10, 10, 5]
    assert waited.note.startswith("the server was still not healthy after 25 s of waiting (target.load_wait_s)")
    assert waited.result.facts["failed_tier"] == "health"


def test_a_server_that_is_not_running_is_not_waited_for(tmp_path: Path) -> None:
    stopped = tmp_path / "stopped.service"
    stopped.write_text("[Service]\nExecStart=/opt/nowhere/vllm serve /m\n")
    with stub_server({"GET /health": (503, "loading")}) as url:
        ctx = checks(tmp_path, url, stopped)
        clock = StageClock([])
        waited = wait_until_loaded(ctx, check_health(ctx), clock, lambda line: None)
    assert waited.outcome == "not loading" and clock.slept == []


def test_verify_reports_the_server_that_finished_loading(tmp_path: Path, unit: Path) -> None:
    routes = {"GET /health": (503, "loading")}
    with stub_server(routes) as url:
        config = EyasConfig(
            hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path))},
            target=target(url, unit, 60.0),
        )
        clock = StageClock([lambda: routes.update(HEALTHY)])
        notes: list[str] = []
        ctx = RunContext(
            config=config, host=LocalHost(), http=HttpClient(), clock=clock, run=RunDir(tmp_path / "run"),
            on_note=notes.append,
        )  # fmt: skip
        update = verify_node({}, Runtime(context=ctx))
    health = update["verification"]["health"]
    assert health["status"] != "fail" and "finished loading after 10 s" in health["message"]
    assert any(note.startswith("verify health: the server at") and "still loading" in note for note in notes)
