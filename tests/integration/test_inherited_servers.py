"""The vLLM servers eyas starts carry production's launch: the embedded target plays production, started from a
unit file with non-default flags and environment by the stand-in for systemd (no systemd as PID 1 here); the
evaluation job and the vllm extraction job are built by eyas's own phase code from that unit, launched for real,
and their servers' real argv and environment are read from /proc. No server is waited for: each process carries
its argv and environment from the moment it exists, so each is stopped as soon as it has been read."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate import node as evaluate
from eyas.graph.phases.evaluate.jobs import EVALUATE_PORT
from eyas.graph.phases.extract.jobs import ExtractionRequest, extract_job
from eyas.graph.phases.servers import production_launch
from eyas.graph.runs import RunDir
from eyas.tools.checks.result import CheckResult
from eyas.tools.checks.server_flags import EXTRACT_OWN
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.service.standin import UnitJobService
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import server_spec, unit_file_text
from eyas.tools.workloads.vllm_server import API_SERVER_MODULE, port_in_use

pytestmark = pytest.mark.slow

PORT = 18870  # production's port in the unit; nothing waits for it to answer
FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
# What production was started with and every server of eyas must carry too (vLLM's defaults differ).
PRODUCTION_FLAGS = {"--max-model-len": "1024", "--dtype": "float32", "--served-model-name": "prod-smol"}
MARK = ("EYAS_TEST_MARK", "1")
FIND_S = 120.0  # a process that has not appeared by then never will


def production_spec(target: EmbeddedTarget) -> JobSpec:
    """The embedded target's own launch with non-default flags and one extra variable."""
    spec = server_spec(target, eager=True)
    argv = list(spec.argv)
    for flag, value in PRODUCTION_FLAGS.items():
        while flag in argv:  # drop the recipe's value, then give ours once
            del argv[argv.index(flag) : argv.index(flag) + 2]
        argv += [flag, value]
    return spec.model_copy(update={"argv": argv, "env": {**spec.env, MARK[0]: MARK[1]}})


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) if entry.name.isdigit() else None
        except OSError:
            continue
        if parent is not None:
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def argv_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def environ_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def find_server(root: int) -> int:
    """The vLLM API server process under `root`, polled for until it exists (it is spawned, not waited on)."""
    deadline = time.monotonic() + FIND_S
    while time.monotonic() < deadline:
        for pid in process_tree(root):
            try:
                if API_SERVER_MODULE in argv_of(pid):
                    return pid
            except OSError:
                continue
        time.sleep(0.2)
    raise AssertionError(f"no {API_SERVER_MODULE} process appeared under pid {root} within {FIND_S:.0f} s")


def assert_carries_production(pid: int) -> None:
    argv, env = argv_of(pid), environ_of(pid)
    for flag, value in PRODUCTION_FLAGS.items():
        assert argv[argv.index(flag) + 1] == value, (flag, argv)
        assert argv.count(flag) == 1, (flag, argv)
    assert env.get(MARK[0]) == MARK[1]
    assert str(PORT) not in argv  # its own port, not production's


def no_health() -> CheckResult:
    raise AssertionError("this test never waits for production to be healthy")


@pytest.fixture
def production(tmp_path: Path) -> Iterator[tuple[EmbeddedTarget, Path]]:
    """The embedded target started from its unit file by the stand-in for systemd. Its server is read from /proc
    (it runs what the unit says) and stopped at once: eyas's servers are built from the unit, not the process."""
    target = EmbeddedTarget(EmbeddedTarget.from_env().cache_dir, port=PORT)
    if not target.python.exists() or not (target.model_dir / "config.json").exists():
        pytest.skip("the embedded target is not built (make target)")
    unit = tmp_path / "prod-smol.service"
    unit.write_text(unit_file_text(production_spec(target)))
    host = LocalHost()
    service = UnitJobService(host, str(unit), str(tmp_path / "prod"), "prod-smol", no_health, SYSTEM_CLOCK)
    service.start()
    try:
        main_pid = service.status().main_pid
        assert main_pid is not None
        server = find_server(main_pid)
        argv = argv_of(server)
        assert all(argv[argv.index(flag) + 1] == value for flag, value in PRODUCTION_FLAGS.items())
        assert environ_of(server).get(MARK[0]) == MARK[1]
    finally:
        service.stop()
    yield target, unit


def run_context(tmp_path: Path, target: EmbeddedTarget, unit: Path) -> RunContext:
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=str(target.python), workdir=str(tmp_path / "work"))},
        target=TargetConfig(
            base_url=f"http://127.0.0.1:{PORT}",
            model="prod-smol",
            model_dir=str(target.model_dir),
            unit_file=str(unit),
        ),
    )
    return RunContext(
        config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(tmp_path / "r1")
    )


def launch_and_read(ctx: RunContext, spec: JobSpec) -> None:
    jobs = Jobs(ctx.host, ctx.host_config.workdir)
    state = jobs.launch(spec)
    assert state.pid is not None
    server = None
    try:
        server = find_server(state.pid)
        assert_carries_production(server)
    finally:
        jobs.cancel(spec.job_id, grace_s=10)
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server, signal.SIGKILL)  # its own session; the workload stops it too


def test_evaluation_and_extraction_servers_carry_production_flags_and_environment(
    tmp_path: Path, production: tuple[EmbeddedTarget, Path]
) -> None:
    target, unit = production
    if port_in_use(EVALUATE_PORT):
        pytest.skip("the evaluation's port is taken by another process on this machine")
    ctx = run_context(tmp_path, target, unit)
    upload_workloads(ctx.host, ctx.host_config.workdir)
    # What evaluate.py reads before it starts its first server: held-out prompts and a drafter's config.
    Path(ctx.artifact("held_out")).parent.mkdir(parents=True)
    Path(ctx.artifact("held_out")).write_text(json.dumps({"prompt": "Say hi."}) + "\n")
    Path(ctx.artifact("drafter")).mkdir(parents=True)
    Path(ctx.artifact("drafter"), "config.json").write_text("{}")
    state = {
        "sizes": DEMO.model_dump(),
        "plan": {"production_load": {"load_s": 120.0, "source": "target.load_time_s in the config"}},
        "gpus": {"count": 0},
    }

    (evaluation,) = evaluate.build_jobs(ctx, state)  # type: ignore[arg-type]
    assert evaluation.argv[evaluation.argv.index("--start-timeout") + 1] == "780.0"  # 120 s x 1.5 + 600 s
    launch_and_read(ctx, evaluation)

    request = ExtractionRequest(
        model_dir=ctx.model_dir, conversations=str(FIXTURES / "extract_conversations.jsonl"),
        out_dir=ctx.artifact("hidden_states"), max_tokens=512, backend="vllm", concurrency=1,
        launch=production_launch(ctx, EXTRACT_OWN), ready_timeout_s=780.0,
    )  # fmt: skip
    launch_and_read(ctx, extract_job("r1.extract", ctx.host_config, ctx.workloads_dir, request))
