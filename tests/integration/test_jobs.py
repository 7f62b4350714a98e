"""Detached jobs against real processes, over LocalHost and over SSHHost to a real sshd on 127.0.0.1.

Jobs that must stay running wait for a `release` file in the work directory, so no test depends on
how long something takes; the tests poll job status with a deadline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from eyas.graph.supervise import clear_for_retry
from eyas.tools.errors import JobError
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState, JobStatus, wrapper_script
from in_process import eyas
from jobs_config import jobs_config
from sshd import Sshd
from waiting import process_gone, wait_for

# Waits in the job's cwd until the test creates `release`.
GATE = "while [ ! -e release ]; do sleep 0.05; done"


def shell_job(job_id: str, script: str, workdir: str, **env: str) -> JobSpec:
    """A job running `script` in /bin/sh -c, in the work directory."""
    return JobSpec(job_id=job_id, argv=["/bin/sh", "-c", script], cwd=workdir, env=env)


def release(workdir: str) -> None:
    """Let every GATE-d job of the work directory go on."""
    Path(workdir, "release").touch()


def _stop_leftovers(manager: Jobs, workdir: str) -> None:
    """Release and cancel what a failed test left running."""
    release(workdir)
    for state in manager.list():
        if state.status is JobStatus.RUNNING:
            manager.cancel(state.job_id, grace_s=1)


@pytest.fixture
def jobs(host: Host, workdir: str) -> Iterator[Jobs]:
    """Jobs in the test's work directory, on each kind of host."""
    manager = Jobs(host, workdir)
    yield manager
    _stop_leftovers(manager, workdir)


@pytest.fixture
def local_jobs(workdir: str) -> Iterator[Jobs]:
    """The same work directory's jobs, seen directly on this machine."""
    manager = Jobs(LocalHost(), workdir)
    yield manager
    _stop_leftovers(manager, workdir)


def wait_finished(jobs: Jobs, job_id: str, timeout: float = 20) -> JobState:
    """Poll the job's status until it has finished; return that state."""

    def finished() -> JobState | None:
        state = jobs.status(job_id)
        return state if state.finished else None

    return wait_for(finished, timeout, what=f"job {job_id} to finish")


def test_launch_runs_then_succeeds_with_its_log(jobs: Jobs, workdir: str) -> None:
    """A launched job reports running with its pid, then succeeded with rc 0; its output is in the log."""
    state = jobs.launch(shell_job("hello", f"echo hello from the job; {GATE}; echo bye", workdir))
    assert state.status is JobStatus.RUNNING
    assert state.pid is not None and not process_gone(state.pid)
    assert state.started_at is not None and state.finished_at is None
    assert jobs.status("hello").status is JobStatus.RUNNING
    release(workdir)
    done = wait_finished(jobs, "hello")
    assert (done.status, done.rc, done.pid) == (JobStatus.SUCCEEDED, 0, state.pid)
    assert done.finished_at is not None
    log = jobs.tail("hello")
    assert "hello from the job\nbye\n" in log
    assert "eyas: job ended with exit code 0" in log


def test_relaunch_with_the_same_id_starts_nothing(jobs: Jobs, workdir: str) -> None:
    """Launching an id again, while it runs or after it ended, reports that job and starts no process."""
    spec = shell_job("once", f"echo $$ >> pids; {GATE}", workdir)
    first = jobs.launch(spec)
    again = jobs.launch(spec)
    assert again.status is JobStatus.RUNNING and again.pid == first.pid
    release(workdir)
    wait_finished(jobs, "once")
    after = jobs.launch(spec)
    assert after.status is JobStatus.SUCCEEDED and after.pid == first.pid
    assert len(Path(workdir, "pids").read_text().splitlines()) == 1


def test_concurrent_launches_of_one_id_start_one_process(jobs: Jobs, workdir: str) -> None:
    """Eight controllers launching the same id at the same moment start it once."""
    spec = shell_job("race", f"echo $$ >> pids; {GATE}", workdir)
    states: list[JobState] = []
    threads = [threading.Thread(target=lambda: states.append(jobs.launch(spec))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(states) == 8
    assert {state.pid for state in states} == {states[0].pid}
    assert len(Path(workdir, "pids").read_text().splitlines()) == 1


def test_failed_job_reports_its_exit_code(jobs: Jobs, workdir: str) -> None:
    """A job that exits non-zero is failed, with that rc."""
    jobs.launch(shell_job("bad", "echo about to fail >&2; exit 3", workdir))
    done = wait_finished(jobs, "bad")
    assert (done.status, done.rc) == (JobStatus.FAILED, 3)
    assert done.describe() == "failed (exit 3)"
    assert "about to fail" in jobs.tail("bad")


def test_a_retry_forgets_what_broke_and_of_jobs_that_run_together_stops_the_rest(
    local_jobs: Jobs, workdir: str
) -> None:
    """The failure gate's retry (supervise.clear_for_retry): a shard apart is forgotten alone; of the nodes of one
    training job, the one still running is stopped and both are forgotten, so the launch starts them all again."""
    for job_id, script in (("run.train-0", GATE), ("run.train-1", "exit 3"), ("run.extract-1", "exit 3")):
        local_jobs.launch(shell_job(job_id, script, workdir))
    wait_finished(local_jobs, "run.train-1")
    wait_finished(local_jobs, "run.extract-1")

    clear_for_retry(local_jobs, ["run.extract-1"], together=False)
    assert local_jobs.status("run.extract-1").status is JobStatus.ABSENT
    assert local_jobs.status("run.train-0").status is JobStatus.RUNNING
    clear_for_retry(local_jobs, ["run.train-0", "run.train-1"], together=True)
    assert [state.status for state in local_jobs.statuses(["run.train-0", "run.train-1"])] == [JobStatus.ABSENT] * 2


def test_job_killed_without_exit_code_is_lost(jobs: Jobs, host: Host, workdir: str) -> None:
    """SIGKILL to the job's whole process group leaves no rc: the job is lost, not running."""
    state = jobs.launch(shell_job("victim", GATE, workdir))
    assert state.pid is not None
    host.run(f"kill -KILL -{state.pid}").check("killing the job's group")
    lost = wait_for(lambda: jobs.status("victim").status is JobStatus.LOST, 10, what="status lost")
    assert lost
    assert jobs.status("victim").rc is None


def test_cancel_kills_the_whole_process_group(jobs: Jobs, workdir: str) -> None:
    """cancel() ends the job and a grandchild that ignores SIGTERM (killed after the grace period)."""
    grandchild = "sh -c 'trap \"\" TERM; echo $$ > grandchild; exec sleep 300' &"
    state = jobs.launch(shell_job("stubborn", f"{grandchild} wait", workdir))
    pid_file = Path(workdir, "grandchild")
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, what="the grandchild's pid")
    grandchild_pid = int(pid_file.read_text())
    assert not process_gone(grandchild_pid)
    cancelled = jobs.cancel("stubborn", grace_s=1)
    assert cancelled.finished and cancelled.status is JobStatus.FAILED
    assert state.pid is not None
    for pid in (state.pid, grandchild_pid):
        wait_for(lambda pid=pid: process_gone(pid), 5, what=f"process {pid} to end")


def test_cancel_kills_a_job_that_ignores_sigterm(jobs: Jobs, workdir: str) -> None:
    """A job that ignores SIGTERM is killed after the grace period and recorded as exit 137."""
    state = jobs.launch(shell_job("deaf", f"trap '' TERM; echo ready > ready; {GATE}", workdir))
    wait_for(lambda: Path(workdir, "ready").exists(), 10, what="the job to set its trap")
    cancelled = jobs.cancel("deaf", grace_s=0.5)
    assert (cancelled.status, cancelled.rc) == (JobStatus.FAILED, 137)
    assert state.pid is not None
    wait_for(lambda: process_gone(state.pid), 5, what="the job to end")


def test_program_only_in_a_venv_is_not_found_without_its_path(jobs: Jobs, workdir: str) -> None:
    """The PATH trap: a bare tool name from a venv fails at once with 127 and says to give the absolute path."""
    tool = Path(workdir, "venv", "bin", "mytool")
    tool.parent.mkdir(parents=True)
    tool.write_text('#!/bin/sh\necho "mytool ran with $1"\n')
    tool.chmod(0o755)
    jobs.launch(JobSpec(job_id="bare", argv=["mytool", "x"], cwd=workdir))
    failed = wait_finished(jobs, "bare", timeout=5)
    assert (failed.status, failed.rc) == (JobStatus.FAILED, 127)
    log = jobs.tail("bare")
    assert "'mytool' is not found by a non-interactive shell" in log
    assert "absolute path" in log
    jobs.launch(JobSpec(job_id="absolute", argv=[str(tool), "x"], cwd=workdir))
    assert wait_finished(jobs, "absolute").status is JobStatus.SUCCEEDED
    assert "mytool ran with x" in jobs.tail("absolute")


@pytest.mark.sshd
def test_job_survives_the_ssh_connection_that_launched_it(sshd: Sshd, local_jobs: Jobs, workdir: str) -> None:
    """Closing the launching SSH connection leaves the job running; it later succeeds."""
    before = sshd.connections()
    with sshd.host() as launcher:
        state = Jobs(launcher, workdir).launch(shell_job("detached", f"{GATE}; echo finished", workdir))
        served_by = sshd.connections() - before
    assert state.status is JobStatus.RUNNING
    assert len(served_by) == 1
    wait_for(lambda: all(process_gone(pid) for pid in served_by), 10, what="sshd to end the launching connection")
    assert local_jobs.status("detached").status is JobStatus.RUNNING
    with sshd.host() as observer:
        jobs = Jobs(observer, workdir)
        assert jobs.status("detached").pid == state.pid
        release(workdir)
        assert wait_finished(jobs, "detached").status is JobStatus.SUCCEEDED
        assert "finished" in jobs.tail("detached")


def test_list_and_tail(jobs: Jobs, workdir: str) -> None:
    """list() reports every job of the work directory in id order; tail() gives the last lines of a log."""
    assert jobs.list() == []
    jobs.launch(shell_job("b-waits", GATE, workdir))
    jobs.launch(shell_job("a-counts", "for i in 1 2 3 4 5; do echo line $i; done", workdir))
    wait_finished(jobs, "a-counts")
    listed = jobs.list()
    assert [(state.job_id, state.status) for state in listed] == [
        ("a-counts", JobStatus.SUCCEEDED),
        ("b-waits", JobStatus.RUNNING),
    ]
    assert jobs.tail("a-counts", lines=3) == "line 4\nline 5\neyas: job ended with exit code 0\n"
    assert jobs.tail("never-launched") == ""
    assert jobs.status("never-launched").status is JobStatus.ABSENT


def test_the_jobs_command_lists_tails_and_cancels(local_jobs: Jobs, workdir: str, tmp_path: Path) -> None:
    """`eyas jobs` on the target's host: a table, --json for scripts, a log's end, and a cancel that stops it."""
    config = str(jobs_config(tmp_path / "eyas.toml", Path(workdir)))
    local_jobs.launch(shell_job("r.generate", f"echo answered; {GATE}", workdir))
    wait_for(lambda: "answered" in local_jobs.tail("r.generate"), 20, what="the job's first line")

    table = eyas("jobs", "--config", config)
    assert table.code == 0 and "r.generate" in table.output and "running" in table.output, table.output
    listed = json.loads(eyas("jobs", "--config", config, "--json").stdout)
    assert [(job["job_id"], job["status"]) for job in listed] == [("r.generate", "running")]
    assert listed[0]["pid"] == local_jobs.status("r.generate").pid

    tail = eyas("jobs", "--config", config, "tail", "r.generate").stdout
    assert tail.startswith("eyas: started ") and tail.endswith("running /bin/sh\nanswered\n"), tail
    cancelled = eyas("jobs", "--config", config, "cancel", "r.generate")
    assert cancelled.code == 0 and "r.generate: failed (exit 143)" in cancelled.output, cancelled.output
    assert local_jobs.status("r.generate").status is JobStatus.FAILED


def test_forget_refuses_a_running_job(jobs: Jobs, workdir: str) -> None:
    """forget() refuses while the job runs; once it ended, the id can be launched afresh."""
    spec = shell_job("again", f"echo run >> runs; {GATE}", workdir)
    jobs.launch(spec)
    with pytest.raises(JobError, match="still running"):
        jobs.forget("again")
    release(workdir)
    wait_finished(jobs, "again")
    jobs.forget("again")
    assert jobs.status("again").status is JobStatus.ABSENT
    jobs.launch(spec)
    assert wait_finished(jobs, "again").status is JobStatus.SUCCEEDED
    assert Path(workdir, "runs").read_text() == "run\nrun\n"


def test_invalid_job_id_is_refused(jobs: Jobs) -> None:
    """Job ids become directory names: anything but letters, digits, '.', '_' and '-' is refused."""
    with pytest.raises(JobError, match="Invalid job id"):
        jobs.launch(JobSpec(job_id="../escape", argv=["/bin/true"]))


# -- quoting ------------------------------------------------------------------------------------

TRICKY = [
    "with  two spaces",
    'it\'s "quoted"',
    "$(touch pwned)",
    "`touch pwned`",
    "line one\nline two\n",
    "*",
    "$HOME ${PATH}",
    "back\\slash; rm -rf /nonexistent &&",
    "-n",
    "",
]
DUMP = (
    "import json, os, sys\n"
    "env = {k: os.environ[k] for k in os.environ if k.startswith('TRICKY_')}\n"
    "json.dump({'argv': sys.argv[1:], 'env': env, 'cwd': os.getcwd()}, open('seen.json', 'w'))\n"
)


def test_wrapper_runs_argv_env_and_cwd_literally(jobs: Jobs, workdir: str) -> None:
    """Arguments, environment values and cwd with spaces, quotes, $(...) and newlines reach the program as given."""
    cwd = Path(workdir, "a dir with 'quotes' and $(spaces)")
    cwd.mkdir()
    env = {f"TRICKY_{i}": value for i, value in enumerate(TRICKY)}
    spec = JobSpec(job_id="tricky", argv=[sys.executable, "-c", DUMP, *TRICKY], env=env, cwd=str(cwd))
    jobs.launch(spec)
    assert wait_finished(jobs, "tricky").status is JobStatus.SUCCEEDED
    seen = json.loads((cwd / "seen.json").read_text())
    assert seen == {"argv": TRICKY, "env": env, "cwd": str(cwd)}
    assert not list(Path(workdir).rglob("pwned"))


def test_wrapper_script_is_valid_shell_and_refuses_bad_env_names(tmp_path: Path) -> None:
    """The generated script parses with sh -n; an env name that would be shell syntax is refused."""
    spec = JobSpec(job_id="x", argv=["prog", *TRICKY], env={"A_1": "$(x)\n'"}, cwd="/tmp/it's")
    script = tmp_path / "run.sh"
    script.write_text(wrapper_script(spec, "/tmp/jobs/x"))
    subprocess.run(["/bin/sh", "-n", str(script)], check=True)
    with pytest.raises(ValidationError, match="names must be"):
        JobSpec(job_id="x", argv=["prog"], env={"A=1; touch pwned; B": "v"})
