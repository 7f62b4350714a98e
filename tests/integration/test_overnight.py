"""Overnight runs survive the controller: the monitor waits out an SSH outage (a real sshd on 127.0.0.1 stopped and
started again) and re-attaches to the jobs, which kept running; a driver's heartbeat tells `eyas watch` a dead
driver from a frozen, an ended and a live one; the watch's systemd user unit runs; and a detached driver killed
with kill -9 under `eyas watch` is restarted and the run completes with no job started twice, and a real run goes on
through an outage of its host's sshd longer than the SSH keepalive (both on the real vLLM target)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.runtime import Runtime

from dashboard_server import dashboard
from eyas.agents.faces.cli.replay import replay
from eyas.graph.context import RunContext
from eyas.graph.life.driver import drivers
from eyas.graph.life.heartbeat import Beat, Heartbeat, heartbeat_path, read_beat
from eyas.graph.life.run_view import read_run
from eyas.graph.life.watch import Condition, assess
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.supervise import make_monitor
from eyas.tools.errors import HostUnreachable
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.private_files import write_private
from eyas.tools.settings.config import EyasConfig, HostConfig, TargetConfig
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from jobs_config import UNREACHABLE
from pipeline_runs import EYAS, TINY, conversation_ids, environment, events, launches, sleeps_in, write_policy
from sshd import Sshd
from waiting import wait_for

JOB = "r.generate"


# -- the SSH outage, at the monitor: a real sshd, a real detached job --------------------------------------------


class Seen:
    """What the run context tells the driver's terminal and heartbeat, collected from the monitor's thread."""

    def __init__(self) -> None:
        self.polls = 0
        self.outages: list[float | None] = []
        self.notes: list[str] = []

    def progress(self, *_: Any) -> None:
        self.polls += 1


def monitor_context(server: Sshd, workdir: Path, run: RunDir, seen: Seen, policy: Policy) -> RunContext:
    host_config = HostConfig(address="127.0.0.1", port=server.port, python=sys.executable, workdir=str(workdir))
    config = EyasConfig(
        hosts={"gpu": host_config},
        target=TargetConfig(host="gpu", base_url="http://127.0.0.1:9", model="any"),
    )
    return RunContext(
        config=config, host=server.host("gpu", connect_timeout=2.0), http=HttpClient(), clock=SYSTEM_CLOCK, run=run,
        policy=policy, poll_interval_s=0.1, on_progress=seen.progress, on_note=seen.notes.append,
        on_host_outage=lambda host, since: seen.outages.append(since),
    )  # fmt: skip


def blocked_job(workdir: Path, fifo: Path) -> None:
    """A job that runs until the test writes a line into `fifo` (it blocks reading it), launched on this machine."""
    os.mkfifo(fifo)
    Jobs(LocalHost(), str(workdir)).launch(JobSpec(job_id=JOB, argv=["/bin/sh", "-c", f"read line < {fifo}"]))


def release(fifo: Path) -> None:
    with fifo.open("w") as writer:  # opens once the job reads
        writer.write("go\n")


@dataclass(frozen=True)
class Monitoring:
    server: Sshd
    seen: Seen
    result: Future[dict[str, Any]]  # what the monitor node returns, or raises
    jobs: Jobs  # the same jobs, read on this machine (which is the SSH host) without SSH
    fifo: Path


@contextmanager
def monitoring_over_ssh(tmp_path: Path, policy: Policy) -> Iterator[Monitoring]:
    """The data phase's monitor node, polling a blocked job through a real sshd of its own, in a thread."""
    server = Sshd(tmp_path / "sshd")
    server.start()
    workdir, fifo, seen = tmp_path / "work", tmp_path / "release", Seen()
    blocked_job(workdir, fifo)
    ctx = monitor_context(server, workdir, RunDir(tmp_path / "runs" / "r"), seen, policy)
    local = Jobs(LocalHost(), str(workdir))
    pool = ThreadPoolExecutor(max_workers=1)
    result = pool.submit(make_monitor("data"), {"jobs": {"data": [JOB]}}, Runtime(context=ctx))
    try:
        wait_for(lambda: seen.polls >= 2 or result.done(), timeout=60, what="the monitor polling over SSH")
        yield Monitoring(server, seen, result, local, fifo)
    finally:
        # Whatever the test left, the monitor ends: its job ends, and its host answers.
        if local.status(JOB).status is JobStatus.RUNNING:
            release(fifo)
        if not result.done():
            server.restart()
        with suppress(Exception):
            result.result(timeout=120)
        pool.shutdown()
        server.stop()
        ctx.host.close()


@pytest.mark.sshd
def test_the_monitor_waits_out_an_ssh_outage_and_reattaches_to_the_job_that_kept_running(tmp_path: Path) -> None:
    with monitoring_over_ssh(tmp_path, Policy(host_retry_max_s=0.5)) as watched:
        seen = watched.seen
        watched.server.stop()
        wait_for(lambda: seen.outages, timeout=60, what="the monitor noticing the outage")
        assert seen.outages[0] is not None and not watched.result.done()
        # The job kept running on the host, and ends there while the host is unreachable.
        assert watched.jobs.status(JOB).status is JobStatus.RUNNING
        release(watched.fifo)
        wait_for(lambda: watched.jobs.status(JOB).status is JobStatus.SUCCEEDED, timeout=30, what="the job ending")
        assert not watched.result.done()
        watched.server.start()
        assert watched.result.result(timeout=60) == {"failure": None}
    assert seen.outages[-1] is None  # told that the host answers again
    assert any("unreachable since" in note for note in seen.notes), seen.notes


@pytest.mark.sshd
def test_the_monitor_gives_up_after_the_policys_bound_with_a_message(tmp_path: Path) -> None:
    policy = Policy(host_outage_hours=1 / 3600, host_retry_max_s=0.2)  # one second
    with monitoring_over_ssh(tmp_path, policy) as watched:
        watched.server.stop()
        with pytest.raises(HostUnreachable) as raised:
            watched.result.result(timeout=60)
    message = str(raised.value)
    assert "unreachable since" in message and "host_outage_hours" in message and "eyas resume r" in message


# -- the heartbeat, as the watch reads it ------------------------------------------------------------------------


def stored_beat(run: RunDir, **fields: Any) -> None:
    beat = Beat(pid=os.getpid(), at=time.time(), interval_s=10.0, driving=True)
    write_private(heartbeat_path(run.create()), beat.model_copy(update=fields).model_dump_json())


def dead_pid() -> int:
    process = subprocess.Popen(["/bin/true"])
    process.wait()
    return process.pid


def test_the_heartbeat_tells_a_live_driver_from_a_frozen_a_dead_and_an_ended_one(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "runs" / "r").create()
    assert assess(run, time.time()).condition is Condition.UNWATCHED

    with run.driving(), Heartbeat(run):
        assert assess(run, time.time()).condition is Condition.ALIVE
        # The same driver, seen from far enough in the future that its beats went stale: frozen.
        frozen = assess(run, time.time() + 10.0 * 13)
        assert frozen.condition is Condition.FROZEN and "stale after 120 s" in frozen.detail
    ended = assess(run, time.time())
    assert ended.condition is Condition.ENDED and ended.beat is not None and not ended.beat.failed

    # A driver that died without a last word: its beat says it drives, but nothing holds the run.
    stored_beat(run, pid=dead_pid(), at=time.time() - 5)
    died = assess(run, time.time())
    assert died.condition is Condition.DIED and "is gone" in died.detail

    # A detached driver that ended before its first beat (the last beat is older, from before it started) never
    # started; a driver run later in a terminal that died is dead, whatever driver job came before it.
    drivers = Jobs(LocalHost(), str(run.root))
    drivers.launch(JobSpec(job_id="driver-1", argv=["/bin/false"]))
    wait_for(lambda: drivers.status("driver-1").finished, timeout=30, what="the driver job ending")
    stored_beat(run, pid=dead_pid(), at=(drivers.status("driver-1").started_at or 0) - 60, job=None)
    assert assess(run, time.time()).condition is Condition.NEVER_STARTED
    stored_beat(run, pid=dead_pid(), at=time.time(), job=None)
    assert assess(run, time.time()).condition is Condition.DIED

    with pytest.raises(RuntimeError), run.driving(), Heartbeat(run):
        raise RuntimeError("the graph broke")
    failed = assess(run, time.time())
    assert failed.condition is Condition.ENDED and failed.beat is not None and failed.beat.failed
    assert "the graph broke" in failed.detail


def test_the_runs_list_and_the_dashboard_show_each_runs_driver(tmp_path: Path) -> None:
    """`eyas runs` (table and --json) and the dashboard's runs page say which runs have a live driver, which one
    died, and the host outage a live one waits out; a run no beating eyas drove shows no driver."""
    runs = tmp_path / "runs"
    alive, dead, plain = (RunDir(runs / name).create() for name in ("alive", "dead", "plain"))
    for run in (alive, dead, plain):
        run.write_meta({"kind": "pipeline"})
    stored_beat(dead, pid=dead_pid(), at=time.time() - 5)
    env = {**os.environ, "EYAS_RUNS_DIR": str(runs), "COLUMNS": "300"}
    with alive.driving(), Heartbeat(alive) as beat, dashboard(runs, tmp_path / "ui.log") as served:
        beat.host_outage("gpu", time.time() - 90)
        listed = subprocess.run([EYAS, "runs", "--json"], env=env, capture_output=True, text=True, timeout=120)
        shown = subprocess.run([EYAS, "runs"], env=env, capture_output=True, text=True, timeout=120).stdout
        page = served.logged_in().get("/").text
    drivers = {row["run"]: row["driver"] for row in json.loads(listed.stdout)}
    assert drivers["plain"] is None and drivers["dead"]["condition"] == "died"
    assert drivers["alive"]["condition"] == "alive" and drivers["alive"]["host_unreachable_since"]
    lines = {line.split()[1]: line for line in shown.splitlines() if line.split()[1:2] in (["alive"], ["dead"])}
    assert "alive, beat" in lines["alive"] and "host gpu unreachable since" in lines["alive"], shown
    assert "died: pid" in lines["dead"] and "is gone" in lines["dead"], shown
    assert "host gpu unreachable since" in page and "died: pid" in page and "<th>driver</th>" in page


def test_install_unit_writes_a_user_unit_whose_command_watches(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "EYAS_RUNS_DIR": str(runs)}
    written = subprocess.run([EYAS, "watch", "--install-unit", "--interval", "5"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert written.returncode == 0, written.stderr
    path = tmp_path / "config" / "systemd" / "user" / "eyas-watch.service"
    assert f"wrote {path}" in written.stdout and "systemctl --user enable --now eyas-watch.service" in written.stdout
    text = path.read_text()
    assert "Restart=always" in text and "WantedBy=default.target" in text
    unit = parse_unit_file(text)
    assert unit.exec_start == [sys.executable, "-m", "eyas", "watch", "--interval", "5"]
    assert unit.environment == {"EYAS_RUNS_DIR": str(runs)} and unit.working_directory == str(tmp_path)
    # systemd cannot run here: run the unit's own command line once, as systemd would (plus --once).
    once = subprocess.run([*unit.exec_start, "--once"], env={**os.environ, **unit.environment}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert once.returncode == 0 and f"watching the runs in {runs}" in once.stdout, once.stdout + once.stderr


def test_run_detach_passes_its_options_on_and_watch_tells_of_a_driver_that_failed(tmp_path: Path) -> None:
    (tmp_path / "known_hosts").write_text("")
    # A host whose SSH port refuses at once and a server that is not there: the run starts, then fails in plan.
    (tmp_path / "c.toml").write_text(UNREACHABLE.format(known_hosts=tmp_path / "known_hosts"))
    notes = tmp_path / "notes"
    write_policy(tmp_path / "policy.toml", notify_command=f"cat >> {notes}")
    env = {**os.environ, "EYAS_RUNS_DIR": str(tmp_path / "runs"), "COLUMNS": "400"}
    args = ["--config", "c.toml", "--policy", "policy.toml", "--samples", "24", "--run-id", "failing"]
    detached = subprocess.run([EYAS, "run", "--detach", *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
    assert detached.returncode == 0, detached.stdout + detached.stderr
    run = tmp_path / "runs" / "failing"
    assert f"log: {run / 'jobs' / 'driver-1' / 'log'}" in detached.stdout
    argv = json.loads((run / "jobs" / "driver-1" / "job.json").read_text())["argv"]
    assert argv[1:] == ["-m", "eyas", "run", "--config", str(tmp_path / "c.toml"), "--policy",
                        str(tmp_path / "policy.toml"), "--samples", "24", "--run-id", "failing"]  # fmt: skip
    watched = subprocess.run([EYAS, "watch", "failing", "--interval", "0.5"], env=env, capture_output=True,
                             text=True, timeout=300)  # fmt: skip
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "stopped with an error, so it is not restarted" in watched.stdout, watched.stdout
    assert "nothing more to watch" in watched.stdout and "restarted it" not in watched.stdout
    assert "stopped with an error" in notes.read_text()  # the run's notify command heard it, once
    assert notes.read_text().count("eyas watch:") == 1


# -- kill -9 under eyas watch, on the real target -----------------------------------------------------------------


@pytest.mark.slow
def test_a_driver_killed_with_kill_9_under_eyas_watch_is_restarted_and_the_run_completes_once(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    # Data passes, extraction stops at its gate (its hidden states are over the disk budget): the run ends there.
    policy = write_policy(tmp_path / "policy.toml", max_disk_bytes=1_000_000, notify_command=f"cat >> {notes}")
    runs = tmp_path / "runs"
    env = environment(embedded_target, runs)
    run = runs / f"overnight-{secrets.token_hex(3)}"  # job ids on the shared target are per run: a fresh one
    detached = subprocess.run([EYAS, "run", "--detach", "--run-id", run.name, "--policy", str(policy), *TINY],
                              env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert detached.returncode == 0 and "driven by a detached eyas (job driver-1" in detached.stdout, detached.stderr
    watch = subprocess.Popen([EYAS, "watch", run.name, "--interval", "0.5"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        # Mid-monitor: the generation job runs and the driver polls it.
        wait_for(lambda: sleeps_in(run, "monitor_data") >= 3, timeout=600, what="the driver monitoring generation")
        # The monitor polls inside one node: hours of polling must not grow the checkpoint DB.
        size_before, polls_before = (run / "checkpoints.sqlite").stat().st_size, sleeps_in(run, "monitor_data")
        wait_for(lambda: sleeps_in(run, "monitor_data") >= polls_before + 10, timeout=120, what="ten more polls")
        assert (run / "checkpoints.sqlite").stat().st_size == size_before
        status = subprocess.run([EYAS, "status", run.name], env=env, capture_output=True, text=True, timeout=120)
        assert "driver: alive" in status.stdout and "job driver-1 running" in status.stdout, status.stdout
        assert "heartbeat" in status.stdout and "s ago" in status.stdout
        os.killpg(int((run / "jobs" / "driver-1" / "pid").read_text()), signal.SIGKILL)
        out, _ = watch.communicate(timeout=600)
    finally:
        if watch.poll() is None:
            os.killpg(watch.pid, signal.SIGKILL)
            watch.wait()
        for driver in drivers(RunDir(run)):  # a failed test leaves no detached driver behind
            if driver.status is JobStatus.RUNNING and driver.pid is not None:
                os.killpg(driver.pid, signal.SIGKILL)
    assert watch.returncode == 0, out
    assert "restarted it as driver-2" in out and "nothing more to watch" in out, out
    assert "restarted it as driver-2" in notes.read_text()  # the run's notify command heard it
    second = (run / "jobs" / "driver-2" / "log").read_text()
    assert "over the budget" in second, second  # the resumed driver ran on to the extraction gate
    assert (run / "jobs" / "driver-2" / "rc").read_text().strip() == "3"  # stopped at a gate
    assert not (run / "jobs" / "driver-3").exists()
    assert launches(embedded_target, run.name, "generate") == 1
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24

    # The restart recorded the checkpoint it resumed from; the whole transcript replays, the monitor the kill cut
    # short included, without divergence, to the state the run ended in.
    resumes = [event for event in events(run) if event["kind"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["next"] == ["monitor_data"], resumes
    report, state = replay(run / "transcript.jsonl")
    assert report.ok, report
    assert report.events_replayed == report.events_total
    ended = read_run(RunDir(run)).state
    assert state["phase"] == ended["phase"] and state["jobs"] == ended["jobs"]


# -- a lasting SSH outage in the middle of a real run -------------------------------------------------------------

# The host's SSH keepalive (HostConfig.keepalive_s; 30 s by default), and an outage just over it: long enough that
# the connection the driver held dies and its channels close without an exit status, the bug this guards, which does
# not depend on how long it lasts (at the default keepalive the outage alone was 40 s of this test).
KEEPALIVE_S = 5
OUTAGE_S = 8


def ssh_config(path: Path, server: Sshd, target: EmbeddedTarget) -> Path:
    """The embedded target's config, its host reached over SSH through `server` (the same machine and workdir)."""
    path.write_text(f"""
[hosts.gpu]
address = "127.0.0.1"
port = {server.port}
user = "{server.user}"
key_file = "{server.client_key}"
known_hosts = "{server.known_hosts}"
keepalive_s = {KEEPALIVE_S}
python = "{target.python}"
workdir = "{target.workdir}"

[target]
host = "gpu"
base_url = "{target.base_url}"
model = "{SERVED_MODEL}"
model_dir = "{target.model_dir}"
unit_file = "{target.unit_file}"
""")
    return path


@pytest.mark.slow
@pytest.mark.sshd
def test_a_run_outlives_an_ssh_outage_longer_than_the_keepalive_mid_monitor_and_completes(
    embedded_target: EmbeddedTarget, tmp_path: Path
) -> None:
    server = Sshd(tmp_path / "sshd")
    server.start()
    config = ssh_config(tmp_path / "eyas.toml", server, embedded_target)
    policy = write_policy(tmp_path / "policy.toml", max_disk_bytes=1_000_000, host_retry_max_s=2.0)
    runs = tmp_path / "runs"
    env = environment(embedded_target, runs)
    run = runs / f"outage-{secrets.token_hex(3)}"  # job ids on the shared target are per run: a fresh one
    driver = subprocess.Popen(
        [EYAS, "run", "--config", str(config), "--policy", str(policy), "--run-id", run.name, *TINY], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: sleeps_in(run, "monitor_data") >= 3 or driver.poll() is not None, timeout=600,
                 what="the driver monitoring generation over SSH")  # fmt: skip
        assert driver.poll() is None
        server.stop()
        stopped = time.monotonic()
        wait_for(lambda: unreachable_since(run), timeout=300, what="the heartbeat saying the host is unreachable")
        status = subprocess.run([EYAS, "status", run.name], env=env, capture_output=True, text=True, timeout=120)
        assert "host gpu unreachable since" in status.stdout and "jobs not read" in status.stdout, status.stdout
        wait_for(lambda: time.monotonic() - stopped >= OUTAGE_S or driver.poll() is not None, timeout=OUTAGE_S + 60,
                 interval=1.0, what="the outage's end")  # fmt: skip
        assert driver.poll() is None  # the outage did not end the driver
        server.start()
        out, _ = driver.communicate(timeout=600)
    finally:
        server.stop()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert driver.returncode == 3 and "over the budget" in out, out  # ran on to the extraction gate
    assert "unreachable since" in out and "answers again" in out, out
    assert launches(embedded_target, run.name, "generate") == 1
    ids = conversation_ids(embedded_target, run.name)
    assert len(ids) == len(set(ids)) == 24
    beat = read_beat(RunDir(run))
    assert beat is not None and beat.host_unreachable_since is None and not beat.driving


def unreachable_since(run: Path) -> float | None:
    beat = read_beat(RunDir(run))
    return beat.host_unreachable_since if beat is not None else None
