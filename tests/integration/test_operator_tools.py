"""Each operator tool does what its description tells the agent: the tools that change anything ask for "yes"
first and show the exact effect; the pipeline tools, against a real stored run waiting at its data gate."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import typer
from pydantic import ValidationError

from eyas.agents.faces.chat_control import ChatPipeline
from eyas.agents.faces.cli.plan import plan_command
from eyas.agents.faces.cli.run import run_command
from eyas.agents.operator_tools import AnswerGate, OperatorEnv, RunStatus, ShowPlan, StartRun, operator_tools
from eyas.agents.service_tools import (
    DeployDrafter,
    RestartService,
    RollbackDrafter,
    ServiceStatus,
    WaitForServer,
    service_tools,
)
from eyas.agents.structured import tool_name
from eyas.agents.toolbox import ToolDef
from eyas.graph.life.runner import checkpointer, drive
from eyas.graph.phases.deploy.record import DEPLOY_FILE
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.config import EyasConfig, HostConfig, TargetConfig
from gated_runs import run_at_data_gate, run_at_failure_gate
from production_target import child_argv
from stub_http import HEALTHY, MODEL, stub_server
from waiting import wait_for

# What each tool may do without asking: read. Everything else changes the host or the run.
READS = {"verify", "read_file", "list_jobs", "tail_log", "research", "run_status", "show_plan", "service_status",
         "wait_for_server"}  # fmt: skip
CHANGES = {"cancel_job", "start_run", "resume_run", "answer_gate", "restart_service", "deploy_drafter",
           "rollback_drafter"}  # fmt: skip


@pytest.fixture
def gated(tmp_path: Path) -> RunDir:
    return run_at_data_gate(tmp_path / "runs", "asked")


def config(tmp_path: Path) -> EyasConfig:
    return EyasConfig(
        hosts={"local": HostConfig(address="local", python=sys.executable, workdir=str(tmp_path / "work"))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="target"),
    )


def control(tmp_path: Path, run: RunDir) -> ChatPipeline:
    """The chat's real pipeline controls, attached to the stored run."""
    return ChatPipeline(run, config(tmp_path))


def tools(tmp_path: Path, pipeline: ChatPipeline) -> dict[str, ToolDef]:
    env = OperatorEnv(
        config(tmp_path), lambda name: LocalHost(), HttpClient(), SYSTEM_CLOCK, research=lambda b: "", control=pipeline
    )
    return {tool_name(tool.model): tool for tool in operator_tools(env)}


def test_every_tool_that_changes_anything_asks_first_and_no_read_does(tmp_path: Path, gated: RunDir) -> None:
    defined = tools(tmp_path, control(tmp_path, gated))
    assert set(defined) == READS | CHANGES
    for name in READS:
        assert defined[name].confirm is None, name
    for name in CHANGES:
        assert defined[name].confirm is not None, name


def command_flags(command: Callable[..., None]) -> set[str]:
    app = typer.Typer()
    app.command()(command)
    return {opt for param in typer.main.get_command(app).params for opt in getattr(param, "opts", [])}


def test_start_run_shows_the_exact_command_it_runs(tmp_path: Path, gated: RunDir) -> None:
    pipeline = control(tmp_path, gated)
    start = tools(tmp_path, pipeline)["start_run"]
    assert "per-phase" not in (StartRun.__doc__ or "") and "defaults that fit the target" in (StartRun.__doc__ or "")
    args = StartRun(samples=5000, max_tokens=1024, epochs=2)
    assert start.confirm is not None
    asked = start.confirm(args)
    assert asked.endswith("eyas run --samples 5000 --max-tokens 1024 --epochs 2")
    argv = pipeline.start_argv(args.sizes())
    assert argv[:3] == ["run", "--run-id", gated.run_id]
    assert " ".join(argv).endswith("--samples 5000 --max-tokens 1024 --epochs 2")
    # Every size the tool offers is a flag `eyas run` takes; every size a plan is shown for, one `eyas plan` takes,
    # and the plan is shown for every size of the run that shapes it (the probe is measured at those shapes).
    assert command_flags(run_command) >= {f"--{name.replace('_', '-')}" for name in StartRun.model_fields}
    assert command_flags(plan_command) >= {f"--{name.replace('_', '-')}" for name in ShowPlan.model_fields}
    assert set(ShowPlan.model_fields) == set(StartRun.model_fields) - {"held_out"}
    # The agent sees each size's bounds in the tool's schema, and a call beyond them is refused before it starts.
    assert StartRun.model_json_schema()["properties"]["samples"]["anyOf"][0]["maximum"] == 100_000_000
    with pytest.raises(ValidationError, match="less than or equal to"):
        ShowPlan(samples=10**24)
    # The run has started (it waits at its gate): a second start is refused in words, nothing is spawned.
    with pytest.raises(EyasError, match="has started already"):
        pipeline.start_run(args.sizes())


def test_answer_gate_takes_what_the_gate_takes_once(tmp_path: Path, gated: RunDir) -> None:
    pipeline = control(tmp_path, gated)
    doc = AnswerGate.__doc__ or ""
    assert "retry" in doc and "abort" in doc and "failure gate" in doc and "answered first" in doc
    with pytest.raises(EyasError, match="An approval gate takes one of: approve, reject, edit; not retry"):
        pipeline.answer_gate("retry", "")
    with gated.driving():  # as if `eyas run` waited at the gate: the answer is recorded, nothing is spawned
        assert pipeline.answer_gate("approve", "fits") == "approve recorded; the running eyas continues."
        with pytest.raises(EyasError, match=r"already answered by operator \(chat\) at .*: approve \(fits\)"):
            pipeline.answer_gate("reject", "too late")


def test_run_status_says_what_its_description_promises(tmp_path: Path, gated: RunDir) -> None:
    doc = RunStatus.__doc__ or ""
    assert all(word in doc for word in ("phase", "gate", "verdict", "report"))
    said = control(tmp_path, gated).status()
    assert f"run {gated.run_id}: phase " in said
    assert "waiting at the approval gate of data" in said
    assert "plan: Fits: 1 MB of 100 GB free" in said
    assert f"eyas status {gated.run_id}" in said


def test_run_status_shows_each_jobs_progress_throughput_and_eta(tmp_path: Path) -> None:
    run, ctx = run_at_failure_gate(tmp_path / "runs", "progress")
    assert "throughput" in (RunStatus.__doc__ or "") and "ETA" in (RunStatus.__doc__ or "")
    line = 'EYAS_PROGRESS {"done": 6, "total": 24, "tokens_per_s": 51.5, "eta_s": 90}'
    jobs = Jobs(LocalHost(), ctx.host_config.workdir)
    jobs.forget("data-generate")
    jobs.launch(JobSpec(job_id="data-generate", argv=[sys.executable, "-c", f"print({line!r})"]))
    wait_for(lambda: "EYAS_PROGRESS" in jobs.tail("data-generate", 5), timeout=30)
    said = control(tmp_path, run).status()
    assert "job data-generate (data): " in said
    assert "6/24, 51.5 tokens/s, ETA 1.5 min" in said  # the figures as the run's screen says them


def test_show_plan_runs_eyas_plan_with_the_sizes_and_says_why_it_could_not(tmp_path: Path) -> None:
    """Against a config whose target cannot be reached: the plan's own reason comes back as a readable error
    (the agent tells the operator), not a traceback; nothing is started."""
    path = tmp_path / "eyas.toml"
    path.write_text(
        f"""
[hosts.local]
address = "local"
python = "{sys.executable}"
workdir = "{tmp_path / "work"}"

[target]
host = "local"
base_url = "http://127.0.0.1:9"
model = "target"
"""
    )
    chat = RunDir(tmp_path / "runs" / "chat")
    chat.write_meta({"config": str(path), "embedded": None, "kind": "chat"})
    pipeline = control(tmp_path, chat)
    assert "Starts nothing" in (ShowPlan.__doc__ or "") and "Re-plan" in (ShowPlan.__doc__ or "")
    with pytest.raises(EyasError, match=r"eyas plan could not plan \{'samples': 100\}: .*127\.0\.0\.1:9") as caught:
        pipeline.plan({"samples": 100})
    assert "Traceback" not in str(caught.value)
    assert not pipeline.run.root.exists()  # no run was started


def test_a_failure_gate_takes_retry_or_abort_from_the_chat_and_the_run_goes_on(tmp_path: Path) -> None:
    run, ctx = run_at_failure_gate(tmp_path / "runs", "failed")
    pipeline = control(tmp_path, run)
    assert "waiting at the failure gate of data" in pipeline.status()
    # "approve" here used to reach the driver and crash it; now the chat is told what the gate takes.
    with pytest.raises(EyasError, match="A failure gate takes one of: retry, abort; not approve"):
        pipeline.answer_gate("approve", "")
    with run.driving():
        assert pipeline.answer_gate("abort", "not worth it") == "abort recorded; the running eyas continues."
    # The driver takes the chat's answer from the run folder, as a waiting `eyas run` does.
    with checkpointer(run) as saver:
        outcome = drive(build_graph(saver), ctx, None, ask=None, on_update=lambda update: None)
    assert outcome.finished
    assert outcome.state["stopped"] == "aborted after data-generate failed (rc 1)"
    assert outcome.state["decisions"][-1]["who"] == "operator (chat)"


@pytest.fixture
def production(tmp_path: Path) -> Iterator[tuple[EyasConfig, list[str]]]:
    """A production unit run by the stand-in service manager (a real detached process), whose HTTP side is the
    scripted stand-in of tests/support/stub_http.py: these tests are about the tools, not vLLM (the pty session
    restarts and deploys on the real embedded target)."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    unit = tmp_path / "prod.service"
    unit.write_text(f"[Service]\nExecStart={shlex.join(argv)}\n")
    with stub_server(HEALTHY) as url:
        cfg = config(tmp_path).model_copy(
            update={"target": TargetConfig(base_url=url, model=MODEL, unit_file=str(unit), load_time_s=42.0)}
        )
        yield cfg, argv
        Jobs(LocalHost(), str(tmp_path / "work")).cancel(f"target-server-{urlsplit(url).port}", grace_s=1)


def service_tools_of(cfg: EyasConfig, pipeline: ChatPipeline | None = None) -> dict[str, ToolDef]:
    defs = service_tools(cfg, LocalHost, HttpClient(), SYSTEM_CLOCK, lambda line: None, pipeline)
    return {tool_name(tool.model): tool for tool in defs}


def test_restart_asks_with_the_command_line_and_downtime_then_restarts_and_status_shows_it(
    production: tuple[EyasConfig, list[str]],
) -> None:
    cfg, argv = production
    defined = service_tools_of(cfg)
    doc = " ".join((RestartService.__doc__ or "").split())
    assert "Asks the operator first" in doc and "downtime" in doc and "command line" in doc
    restart = defined["restart_service"]
    assert restart.confirm is not None
    asked = restart.confirm(RestartService())
    assert f"command line (unchanged): {shlex.join(argv)}" in asked
    assert "expected downtime: about 42 s (target.load_time_s)" in asked

    assert "NOT running" in defined["service_status"].run(ServiceStatus())
    said = restart.run(RestartService(max_wait_s=60))
    assert "restarted and healthy after" in said
    status = defined["service_status"].run(ServiceStatus())
    pid = int(status.split("main pid ")[1].split(";")[0])
    assert child_argv(pid) == argv  # the process the unit names runs
    assert f"next start runs: {shlex.join(argv)}" in status and "health: ok" in status
    # The next confirmation uses the load time this restart measured.
    assert "(its last restart from this chat)" in restart.confirm(RestartService())
    assert "nothing to wait for" in defined["wait_for_server"].run(WaitForServer(max_wait_s=30))


def test_deploy_and_rollback_ask_with_the_command_line_before_and_after(
    tmp_path: Path, gated: RunDir, production: tuple[EyasConfig, list[str]]
) -> None:
    cfg, argv = production
    pipeline = ChatPipeline(gated, cfg)
    defined = service_tools_of(cfg, pipeline)
    for tool in (DeployDrafter, RollbackDrafter):
        doc = " ".join((tool.__doc__ or "").split())
        assert "Asks the operator first" in doc and "command line before and after" in doc and "downtime" in doc
    deploy = defined["deploy_drafter"]
    assert deploy.confirm is not None
    # The run at its data gate has trained nothing: the agent is told to name a drafter.
    with pytest.raises(EyasError, match="has no trained drafter yet: pass drafter"):
        deploy.confirm(DeployDrafter())
    asked = deploy.confirm(DeployDrafter(drafter="/models/drafter", k=2))
    spec = '{"method":"eagle3","model":"/models/drafter","num_speculative_tokens":2}'
    assert (
        f"command line before: {shlex.join(argv)}\n    after: {shlex.join([*argv, '--speculative-config', spec])}"
        in (asked)
    )
    assert "expected downtime: about 42 s (target.load_time_s) per restart" in asked

    rollback = defined["rollback_drafter"]
    assert rollback.confirm is not None
    with pytest.raises(EyasError, match="has deployed no drafter"):
        rollback.confirm(RollbackDrafter())
    deployed = DeployResult(kept=True, reason="fits", drop_in="/x/eyas-drafter.conf", drop_in_text="",
                            argv_before=argv, argv_deployed=[*argv, "--speculative-config", spec])  # fmt: skip
    (gated.root / DEPLOY_FILE).write_text(deployed.model_dump_json())
    asked = rollback.confirm(RollbackDrafter())
    assert asked.startswith("remove /x/eyas-drafter.conf from production and restart it")
    assert f"before: {shlex.join(deployed.argv_deployed)}\n    after: {shlex.join(argv)}" in asked
