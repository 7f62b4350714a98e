"""Stored runs made in this process: the real graph and checkpoint DB, with the state put in as the nodes before
would have left it, then driven to their next gate (the data gate, without a target; a failure; the deploy gate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.life.runner import Ask, Outcome, checkpointer, drive, thread
from eyas.graph.life.session import run_meta
from eyas.graph.pipeline import build_graph
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.tools.config_source import ConfigSource
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.executor import jobs_of
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from waiting import wait_for

PLAN = {"fits": True, "verdict": "Fits: 1 MB of 100 GB free", "needed_bytes": 1_000_000,
        "phases": {"data": {"phase_hours": 0.01, "disk_bytes": 1_000_000}}}  # fmt: skip


def run_at_data_gate(runs: Path, run_id: str, state: dict[str, Any] | None = None) -> RunDir:
    """runs/<run_id>, stopped at the data gate (no policy: it waits for an answer); `state` adds to its state."""
    target = EmbeddedTarget(runs.parent / "cache", port=9)
    verification = {"health": {"status": "ok", "message": "up and generating"}}
    values = {"run_id": run_id, "sizes": DEMO.model_dump(), "plan": PLAN, "verification": verification,
              "decisions": [], **(state or {})}  # fmt: skip
    run, outcome = stored_run(target, runs, values, after="plan")
    assert outcome.gate is not None and outcome.gate["phase"] == "data", outcome
    return run


FAILURE = {"phase": "data", "job_id": "data-generate", "status": "failed (rc 1)", "log_tail": "boom",
           "diagnosis": "the generation script exited 1"}  # fmt: skip


def run_at_failure_gate(runs: Path, run_id: str, failure: dict[str, str] = FAILURE) -> tuple[RunDir, RunContext]:
    """runs/<run_id>, stopped at the failure gate of its data phase (its job failed as `failure` says), with the
    real graph; and the context that drives it on."""
    target = EmbeddedTarget(runs.parent / "cache", port=9)
    values = {"run_id": run_id, "sizes": DEMO.model_dump(), "plan": PLAN, "decisions": [], "failure": failure,
              "jobs": {"data": [failure["job_id"]]}}  # fmt: skip
    run, outcome = stored_run(target, runs, values, after="monitor_data")
    assert outcome.gate is not None and outcome.gate["kind"] == "failure", outcome
    ctx = RunContext(config=target.config(), host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run)
    return run, ctx


def run_with_jobs(root: Path, run_id: str, job_ids: list[str]) -> RunDir:
    """root/runs/<run_id> at the data gate, `job_ids` its generation's jobs: real detached jobs on this machine (the
    embedded target's, under root/cache) that each printed one progress line (3 of 10 done) and ended."""
    jobs = jobs_of(EmbeddedTarget(root / "cache", port=9).config(), None, LocalHost())
    progress = TAG + json.dumps({"done": 3, "total": 10, "tokens_per_s": 41.5, "eta_s": 120})
    for job_id in job_ids:
        jobs.launch(JobSpec(job_id=job_id, argv=["/bin/sh", "-c", f"echo '{progress}'"]))
    wait_for(lambda: all(state.finished for state in jobs.statuses(job_ids)), 30, what="the jobs' ends")
    return run_at_data_gate(root / "runs", run_id, {"jobs": {"generate": job_ids}, "phase": "generate"})


def stored_run(
    target: EmbeddedTarget, runs: Path, values: dict[str, Any], *, after: str, policy: Policy | None = None,
    ask: Ask | None = None,
) -> tuple[RunDir, Outcome]:  # fmt: skip
    """runs/<values["run_id"]> on `target`, its state `values` as the node `after` leaves it, driven until it ends or
    waits at a gate that `ask` (if given) does not answer."""
    run = RunDir(runs / values["run_id"])
    run.write_meta(run_meta(ConfigSource(None, "a test", target), policy, DEMO))
    ctx = RunContext(config=target.config(), host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run,
                     policy=policy)  # fmt: skip
    with checkpointer(run) as saver:
        graph = build_graph(saver)
        graph.update_state(thread(run), values, as_node=after)
        return run, drive(graph, ctx, None, ask=ask, on_update=lambda update: None)
