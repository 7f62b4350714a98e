"""Launching a phase's jobs idempotently, and supervising them until they end."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeVar

from langgraph.runtime import Runtime

from eyas.graph.context import Node, RunContext
from eyas.graph.crash_points import crash_point
from eyas.graph.policy import Policy
from eyas.graph.run_facts import run_facts
from eyas.graph.state import Failure, RunState
from eyas.tools.hosts.patience import patiently, stamp
from eyas.tools.jobs.detached import JobSpec, JobState, JobStatus, last_words
from eyas.tools.jobs.executor import JobExecutor, launch_noted
from eyas.tools.jobs.job_progress import progress_in
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.retry import Backoff

# How a phase turns the run's state into its jobs (the gate shows them, the launch starts them).
SpecBuilder = Callable[[RunContext, RunState], list[JobSpec]]
T = TypeVar("T")
Setup = Callable[[RunContext, RunState], dict[str, Any]]  # a state update (e.g. what the setup found)


def make_launch(
    phase: str, build: SpecBuilder, artifact: str, setup: Setup | None = None, together: bool = False
) -> Node:
    """Launch every job of the phase. Job ids are fixed per run and phase, and the host refuses a second
    process for an id, so re-running this node after a crash launches nothing twice. Jobs `together` are the
    nodes of one distributed job: after one failed, a retry stops the others and relaunches them all."""

    def launch(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        ctx = runtime.context
        specs = build(ctx, state)
        upload_workloads(ctx.host, ctx.host_config.workdir)
        prepared = setup(ctx, state) if setup is not None else {}
        jobs = ctx.jobs
        # Reached after a failure only through the failure gate's "retry": relaunch what failed or was lost.
        run = run_facts(state)
        if run.failure is not None:
            clear_for_retry(jobs, [spec.job_id for spec in specs], together)
        crash_point("before_launch")
        for spec in specs:
            started = launch_noted(ctx.boundary, jobs, spec)
            ctx.on_note(f"{phase}: job {spec.job_id} {started.describe()}{started.pid_text}")
        crash_point("after_launch")
        return {
            **prepared,
            "phase": phase,
            "failure": None,
            "jobs": {**run.jobs, phase: [spec.job_id for spec in specs]},
            "artifacts": {**run.artifacts, artifact: ctx.artifact(artifact)},
        }

    launch.__name__ = f"launch_{phase}"
    return launch


def clear_for_retry(jobs: JobExecutor, job_ids: list[str], together: bool) -> None:
    """Forget the jobs that failed or were lost, so that launching relaunches them; when the jobs run together
    and one of them broke, stop and forget the rest too (their collectives would wait for the lost one)."""
    states = {state.job_id: state.status for state in jobs.statuses(job_ids)}
    broken = [job_id for job_id in job_ids if states[job_id] in (JobStatus.FAILED, JobStatus.LOST)]
    if together and broken:
        for job_id in job_ids:
            if states[job_id] is JobStatus.RUNNING:
                jobs.cancel(job_id)
        broken = [job_id for job_id in job_ids if states[job_id] is not JobStatus.ABSENT]
    for job_id in broken:
        jobs.forget(job_id)


def make_monitor(phase: str) -> Node:
    """Poll the phase's jobs until all succeed or one fails. The loop stays inside the node, so hours of
    polling write nothing to the checkpoint; a resumed run simply starts polling again."""

    def monitor(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        ctx = runtime.context
        jobs = ctx.jobs
        ids = state["jobs"][phase]

        def poll() -> tuple[list[JobState], dict[str, dict[str, Any]]]:
            states = jobs.statuses(ids)
            return states, {s.job_id: progress_in(jobs.tail(s.job_id, 20)) for s in states}

        while True:
            states, progress = patient(ctx, poll)
            ctx.on_progress(phase, states, progress)
            broken = next((s for s in states if s.status in (JobStatus.FAILED, JobStatus.LOST)), None)
            if broken is not None:
                tail = patient(ctx, partial(jobs.tail, broken.job_id, 40))
                return {"failure": Failure(phase=phase, job_id=broken.job_id, status=broken.describe(),
                                           log_tail=tail, diagnosis=diagnose(broken, tail))}  # fmt: skip
            if all(s.status is JobStatus.SUCCEEDED for s in states):
                return {"failure": None}
            ctx.clock.sleep(ctx.poll_interval_s)

    monitor.__name__ = f"monitor_{phase}"
    return monitor


def patient(ctx: RunContext, read: Callable[[], T]) -> T:
    """`read()` from the host, waiting out an outage with backoff (the policy's bounds, else their defaults): the
    jobs keep running there, and once the host answers the monitor carries on where it was."""
    policy = ctx.policy or Policy()
    backoff = Backoff(first_s=ctx.poll_interval_s, cap_s=policy.host_retry_max_s)
    name = ctx.host.name

    def on_outage(since: float | None, wait: float) -> None:
        ctx.on_host_outage(name, since)
        if since is not None:
            ctx.on_note(
                f"host {name} unreachable since {stamp(since)}; trying again in {wait:.3g} s (its jobs keep running)"
            )
        else:
            ctx.on_note(f"host {name} answers again; re-attached to its jobs")

    after = f"Its jobs may still be running: once it answers, `eyas resume {ctx.run.run_id}` re-attaches to them."
    give_up_s = policy.host_outage_hours * 3600
    return patiently(
        read, backoff=backoff, give_up_s=give_up_s, clock=ctx.clock, host=name, on_outage=on_outage, after=after
    )


def diagnose(state: JobState, tail: str) -> str:
    """A first reading of why a job died, from its exit code and the end of its log."""
    text = tail.lower()
    if state.status is JobStatus.LOST:
        return (
            "The process vanished without an exit code: killed with SIGKILL (the kernel's OOM killer, or by hand) "
            "or the host rebooted. Check `dmesg` on the host; retry resumes the work."
        )
    if state.rc == 127 or "is not found by a non-interactive shell" in text:
        return "A program was not found on the non-interactive PATH: use the ML venv's absolute path."
    if "no space left on device" in text or "disk guard" in text:
        return "The disk filled up: free space or choose a smaller plan, then retry."
    if "out of memory" in text or "outofmemoryerror" in text:
        return "Out of memory: lower the batch size or the sequence length, then retry."
    if "connection refused" in text or "connecterror" in text:
        return "The job could not reach the target server: check `eyas verify`, then retry."
    return f"Exit code {state.rc}; the log ends with: {last_words(tail) or '(empty log)'}"


def after_monitor(state: RunState) -> Literal["failed", "done"]:
    return "failed" if run_facts(state).failure else "done"
