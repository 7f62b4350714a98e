"""What `eyas status` and `eyas runs` say of a detached driver that stopped at a gate (issue 41): the run waits at
that gate; the driver did its job and did not fail ("job driver-1 failed (exit 3)" was the old line). A real driver
job (`eyas resume` started by graph/life/driver.py, a process of its own) on a real run folder at the data gate."""

from __future__ import annotations

from pathlib import Path

from eyas.graph.life.driver import driver_jobs, start_driver
from eyas.tools.exit_codes import ExitCode
from gated_runs import run_at_data_gate
from in_process import eyas
from waiting import wait_for


def test_a_driver_stopped_at_a_gate_shows_as_waiting_there(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = run_at_data_gate(runs, "detached-at-gate")
    env = {"EYAS_RUNS_DIR": str(runs), "EYAS_CACHE_DIR": str(tmp_path / "cache")}
    job = start_driver(run, ["resume", run.run_id], cwd=tmp_path, env=env)
    ended = wait_for(lambda: (state := driver_jobs(run).status(job.job_id)).finished and state, 120, what="driver")
    assert ended.rc == ExitCode.GATE, (driver_jobs(run).tail(job.job_id, 20), ended)
    status = eyas("status", run.run_id, env=env)
    said = " ".join(status.output.split())
    assert (
        "waiting at the approval gate of data" in said
        and "driver: ended; job driver-1 stopped at a gate (exit 3)" in said
    ), said
    assert "failed" not in said and said.count("eyas approve") == 1, said  # the gate's way out, said once
    listed = " ".join(eyas("runs", env=env).output.split())
    assert "waiting at a gate" in listed and "failed" not in listed and "eyas approve" not in listed, listed
