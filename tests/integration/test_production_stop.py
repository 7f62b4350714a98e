"""Everything eyas stops, it restarts: a pipeline run whose plan says production must stop for extraction, with
eyas killed (SIGKILL) while production is stopped. Real eyas processes, real jobs and a real vLLM that plays
production; only the service manager is a stand-in (no systemd as PID 1 here: tools/service/standin.py). And one
downtime window (graph/window.py): extraction, vocab, training and the evaluation stop production once, and a
failure inside the window starts it again before the failure gate waits."""

from __future__ import annotations

import json
import os
import secrets
import signal
import stat
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from extraction import CONVERSATIONS
from eyas.graph.context import Node, RunContext
from eyas.graph.downtime import LOG, RECORD, restoring_production, stopping_production
from eyas.graph.life.runner import checkpointer, drive, thread
from eyas.graph.life.session import run_meta
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.checks.result import Status
from eyas.tools.config_source import ConfigSource
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from pipeline_runs import events, eyas, node_started, start
from production_target import server_argv, service
from waiting import wait_for

pytestmark = pytest.mark.slow

STOP = {
    "action": "stop",
    "downtime_hours": 0.05,
    "gpus": [0],
    "memory_bytes": 0,
    "reason": "a test: extraction needs production's GPUs",
}  # a ProductionImpact, as the plan writes it
PLAN = {"fits": True, "verdict": "Fits: 1 MB of 100 GB free", "needed_bytes": 1_000_000,
        "phases": {"extract": {"phase_hours": 0.01, "disk_bytes": 1_000_000, "production": STOP}}}  # fmt: skip


def run_at_extract_gate(target: EmbeddedTarget, runs: Path) -> RunDir:
    """A run planned as the plan node would leave it, with its conversations already made (the fixture), so it
    waits at the extraction gate; it polls its jobs every 30 s, so a killed monitor is still between polls."""
    run = RunDir(runs / f"prod-stop-{secrets.token_hex(3)}")  # job ids on the shared target are per run: a fresh one
    sizes = DEMO.model_copy(update={"max_seq_len": 256, "draft_vocab_size": 2048, "epochs": 1}).model_dump()
    run.write_meta(run_meta(ConfigSource(None, "a test", target), None, DEMO, poll_interval_s=30.0))
    ctx = RunContext(config=target.config(), host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run)
    values = {"run_id": run.run_id, "sizes": sizes, "plan": PLAN, "decisions": [],
              "verification": {"health": {"status": "ok", "message": "up and generating"}},
              "artifacts": {"conversations": str(CONVERSATIONS)}}  # fmt: skip
    with checkpointer(run) as saver:
        graph = build_graph(saver)
        graph.update_state(thread(run), values, as_node="plan")
        outcome = drive(graph, ctx, None, ask=None, on_update=lambda update: None)
    assert outcome.gate is not None and outcome.gate["phase"] == "extract", outcome
    return run


def test_killed_while_production_is_stopped_resume_restarts_it_first(
    production_target: EmbeddedTarget, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    unit = service(production_target)
    argv_before = server_argv(production_target)
    run = run_at_extract_gate(production_target, runs).root
    approved = eyas(production_target, runs, "approve", run.name, "--reason", "stop production for it")
    assert approved.returncode == 0, approved.stdout + approved.stderr

    resuming = start(production_target, runs, "resume", run.name)
    wait_for(lambda: node_started(run, "monitor_extract") or resuming.poll() is not None, timeout=300)
    assert resuming.poll() is None, resuming.stdout.read() if resuming.stdout else ""
    os.killpg(resuming.pid, signal.SIGKILL)
    resuming.wait()

    # eyas is dead and production stopped: the run folder says so, readable by its owner only.
    record = run / RECORD
    assert json.loads(record.read_text())["phase"] == "extract"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert not unit.status().active and unit.health().facts["failed_tier"] == "tcp"

    resumed = eyas(production_target, runs, "resume", run.name)
    out = resumed.stdout
    assert resumed.returncode == 3 and "stopped at the train gate" in out, out + resumed.stderr
    assert "production: starting" in out and "healthy again after" in out
    assert not record.exists()
    [stop] = [json.loads(line) for line in (run / LOG).read_text().splitlines()]
    # Production came back before the resumed run ran any node: its monitor started after production was healthy.
    monitors = [e["t"] for e in events(run) if e["kind"] == "node" and e["node"] == "monitor_extract"
                and e["phase"] == "start"]  # fmt: skip
    assert len(monitors) == 2 and stop["stopped_at"] < monitors[0] < stop["healthy_at"] <= monitors[1]
    assert stop["restarted_because"].startswith("eyas resume") and stop["downtime_s"] > stop["load_s"] > 0
    assert unit.health().status is Status.OK
    assert (
        server_argv(production_target)
        == argv_before
        == parse_unit_file(production_target.unit_file.read_text()).exec_start
    )

    rejected = eyas(production_target, runs, "approve", run.name, "--reject", "--reason", "enough for this test")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    ended = eyas(production_target, runs, "resume", run.name)
    # Rejected at a gate: the run stopped before its end, exit 1 (the README's exit table).
    assert ended.returncode == 1, ended.stdout + ended.stderr
    report = (run / "report.md").read_text()
    assert "## Production downtime" in report
    assert f"| extract | {unit.name} (stand-in) | {stop['downtime_s']:.0f} s |" in report


WINDOW = ["extract", "vocab", "train", "evaluate"]


def test_one_window_stops_production_once_and_a_failure_inside_it_restarts_it_first(
    production_target: EmbeddedTarget, tmp_path: Path
) -> None:
    """The pipeline's own launch and monitor wrappers (graph/downtime.py) around each phase of the window, as the
    graph runs them. Each phase's jobs are a stand-in (the launch notes whether production is up, the monitor says
    the phase ended or, for the evaluation, failed): real jobs would take the whole pipeline, CPU training and two
    evaluation servers, and the window is decided between a phase's launch and its monitor, not by its jobs."""
    unit = service(production_target)
    run = RunDir(tmp_path / "window").create()
    ctx = RunContext(
        config=production_target.config(), host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run
    )
    stop = {**STOP, "downtime_hours": 0.01, "reason": "a test: the phase needs production's GPUs"}
    plan = {"phases": {phase: {"phase_hours": 0.01, "production": stop} for phase in ("extract", "train", "evaluate")},
            "production_load": {"load_s": 60.0, "source": "a test"}}  # fmt: skip
    approved = {"gate": "extract", "action": "approve", "reason": "one window", "who": "operator", "window": WINDOW}
    state: RunState = {"run_id": "window", "plan": plan, "decisions": [approved]}
    runtime = Runtime(context=ctx)
    up_at_launch: list[bool] = []

    def launch(state: RunState, runtime: Runtime[RunContext]) -> dict[str, object]:
        up_at_launch.append(unit.status().active)
        return {}

    def monitor(phase: str, fails: bool = False) -> Node:
        failed = {"phase": phase, "job_id": f"window.{phase}", "status": "failed"}
        return lambda state, runtime: {"failure": failed} if fails else {}

    def run_phase(phase: str, fails: bool = False) -> dict[str, object]:
        stopping_production(phase, launch)(state, runtime)
        return restoring_production(f"monitor_{phase}", monitor(phase, fails), phase=phase)(state, runtime)

    assert unit.health().status is Status.OK
    for phase in ("extract", "vocab"):
        assert run_phase(phase)["production"] == {"stopped_now": True, "stops": []}  # down for the next phase
        assert (run.root / RECORD).exists() and not unit.status().active, phase
    # Training fails: production comes back in its monitor, before the failure gate (the next node) waits, though the
    # evaluation after it is in the same window.
    run_phase("train", fails=True)
    assert not (run.root / RECORD).exists() and unit.health().status is Status.OK
    [stop] = [json.loads(line) for line in (run.root / LOG).read_text().splitlines()]  # one stop, one start
    assert stop["phase"] == "extract" and stop["window"] == WINDOW and stop["restarted_because"] == "the phase failed"
    assert stop["downtime_s"] > stop["load_s"] > 0

    # The retry relaunches training, which stops production again; it stays down through the evaluation and comes
    # back once, after it.
    run_phase("train")
    assert (run.root / RECORD).exists() and not unit.status().active
    run_phase("evaluate")
    assert not (run.root / RECORD).exists() and unit.health().status is Status.OK
    assert up_at_launch == [False] * 5
    stops = [json.loads(line) for line in (run.root / LOG).read_text().splitlines()]
    assert len(stops) == 2 and stops[1]["phase"] == "train" and stops[1]["restarted_because"] == "the phase ended"
