"""Ray jobs through the executor, on a real two-node Ray cluster on this machine (the session's `ray_cluster`: a
head and a worker node, each its own `ray start` on 127.0.0.1): submit, status, logs and cancel; a resubmit with
the same id starts nothing new; a job killed on its node fails with its exit code; a job whose node dies is lost,
and a retry (forget, launch) runs it again; `eyas status`, the chat's job tools and `eyas jobs` all read a run's
jobs on the cluster."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eyas.agents.faces.gate_text import cluster_lines
from eyas.agents.faces.job_table import job_rows
from eyas.agents.operator_tools import ListJobs, OperatorEnv, TailLog, operator_tools
from eyas.agents.structured import tool_name
from eyas.graph.gates.view import cluster_view
from eyas.graph.life.session import run_meta
from eyas.graph.runs import RunDir
from eyas.graph.supervise import diagnose
from eyas.tools.config_source import ConfigSource
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobState, JobStatus
from eyas.tools.jobs.executor import executor_for
from eyas.tools.jobs.ray_jobs import RayJobs
from eyas.tools.jobs.request import workload_job
from eyas.tools.jobs.resources import job_kind, job_resources
from eyas.tools.jobs.upload import remote_workloads_dir
from eyas.tools.settings.config import ClusterConfig, EyasConfig, HostConfig
from eyas.tools.settings.sizes import DEMO
from eyas.tools.workloads.progress import TAG
from in_process import eyas
from jobs_config import jobs_config
from ray_cluster import WORKER_LABEL, RayCluster
from waiting import process_gone, wait_for

PROMPTS = Path(__file__).resolve().parents[2] / "tools" / "data" / "prompts.jsonl"
START_S = 240  # a job's start on two busy cores: the working_dir's upload, the supervisor actor, the runtime env


def cluster_config(cluster: RayCluster) -> ClusterConfig:
    on_worker = {"num_cpus": 0.5, "labels": WORKER_LABEL}
    return ClusterConfig.model_validate(
        {"executor": "ray", "ray_address": cluster.address, "resources": {"generate": on_worker, "train": on_worker}}
    )


def job_id(kind: str) -> str:
    return f"ray-{uuid.uuid4().hex[:8]}.{kind}"


def shell(job: str, script: str, **fields: object) -> JobSpec:
    return JobSpec.model_validate({"job_id": job, "argv": ["/bin/sh", "-c", script], **fields})


def wait_finished(jobs: RayJobs, job: str, timeout: float, what: str) -> JobState:
    def ended() -> JobState | None:
        state = jobs.status(job)
        return state if state.finished else None

    state = wait_for(ended, timeout, interval=0.5, what=what)
    assert state is not None
    return state


@pytest.mark.slow  # the session's real Ray cluster
def test_a_workload_runs_on_the_node_it_asks_for_once_however_often_it_is_launched(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    workdir = str(tmp_path)
    jobs = RayJobs(LocalHost(), workdir, cluster_config(ray_cluster))
    host = HostConfig(address="local", python=sys.executable, workdir=workdir)
    train_out, runs = tmp_path / "train.jsonl", tmp_path / "runs.log"
    flags = ["--source", str(PROMPTS), "--train", "5", "--held-out", "2", "--train-out", str(train_out)]
    flags += ["--held-out-out", str(tmp_path / "held-out.jsonl")]
    # A real workload script, which reaches the node as Ray's copy of the working_dir, not by its host path.
    spec = workload_job(job_id("generate"), host, remote_workloads_dir(workdir), "prompt_split.py", flags)
    count = f'echo run >> {runs}; echo "token=$TOKEN mode=$MODE"; exec "$@"'
    counted = spec.model_copy(
        update={
            "argv": ["/bin/sh", "-c", count, "sh", *spec.argv],
            "env": {**spec.env, "MODE": "shard"},
            "secrets": {"TOKEN": "s3cr3t-value"},
            "cwd": workdir,
        }
    )
    first = jobs.launch(counted)
    assert first.status is JobStatus.RUNNING
    # A resumed eyas (a new executor) launching the same id re-attaches, while it runs and after it ended.
    assert RayJobs(LocalHost(), workdir, cluster_config(ray_cluster)).launch(counted).status is JobStatus.RUNNING
    done = wait_finished(jobs, counted.job_id, START_S, "the workload to end")
    assert done.status is JobStatus.SUCCEEDED and done.rc == 0
    assert jobs.launch(counted).status is JobStatus.SUCCEEDED
    assert runs.read_text() == "run\n"
    assert len(train_out.read_text().splitlines()) == 5
    assert "token=s3cr3t-value mode=shard" in jobs.tail(counted.job_id)
    details = jobs._client.get_job_info(counted.job_id)
    assert details.driver_node_id == ray_cluster.worker_node_id()
    assert "s3cr3t-value" not in json.dumps(details.runtime_env)  # the secret went by file, not through Ray
    assert [state.job_id for state in jobs.list()] == [counted.job_id]


def sleeper(jobs: RayJobs, kind: str, pid_file: Path, say: str = "") -> tuple[JobSpec, int]:
    """A long job of `kind`, started, that first prints `say`; its process id as the job itself wrote it."""
    first = f"echo {shlex.quote(say)}; " if say else ""
    spec = shell(job_id(kind), f"{first}echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 600")
    jobs.launch(spec)
    return spec, int(wait_for(lambda: pid_file.exists() and pid_file.read_text(), START_S, what="the job's pid"))


@dataclass(frozen=True)
class RunningJob:
    jobs: RayJobs
    config: Path  # an eyas.toml whose [cluster] sends the target host's jobs to the session's Ray cluster
    spec: JobSpec
    pid: int


PROGRESS = {"done": 3, "total": 10, "eta_s": 120.0}  # the progress line the running job printed first


@pytest.fixture(scope="module")
def running_train(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningJob]:
    """One long train job on the cluster, started once for this module's faces (a start takes minutes on two busy
    cores): the readers look at it first, then the `eyas jobs` test cancels it."""
    workdir = tmp_path_factory.mktemp("ray-run")
    jobs = RayJobs(LocalHost(), str(workdir), cluster_config(ray_cluster))
    spec, pid = sleeper(jobs, "train", workdir / "pid", say=TAG + json.dumps(PROGRESS))
    cluster = f'[cluster]\nexecutor = "ray"\nray_address = "{ray_cluster.address}"\n'
    yield RunningJob(jobs, jobs_config(workdir / "eyas.toml", workdir, cluster), spec, pid)
    if jobs.status(spec.job_id).status is JobStatus.RUNNING:  # a test failed before the cancel
        jobs.cancel(spec.job_id)


@pytest.mark.slow  # the session's real Ray cluster
def test_status_and_the_chats_job_tools_read_a_runs_ray_jobs(running_train: RunningJob, tmp_path: Path) -> None:
    """With `executor = "ray"`, `eyas status RUN` (and the chat's run_status, which shows the same rows) and the
    chat's list_jobs and tail_log read the run's jobs on the cluster, not the host's detached jobs (there are none)."""
    job, address = running_train.spec.job_id, running_train.jobs.address
    run = RunDir(tmp_path / "runs" / "on-ray").create()
    run.write_meta(run_meta(ConfigSource(running_train.config, "a test"), None, DEMO))

    def rows_with_progress() -> list[dict[str, Any]] | None:
        rows, unreadable = job_rows(run, {"jobs": {"train": [job]}})
        assert unreadable is None
        assert [(row["phase"], row["job_id"], row["state"]) for row in rows] == [("train", job, "running")]
        return rows if rows[0]["bar"] else None  # Ray's log of the job may lag its start a little

    rows = wait_for(rows_with_progress, 60, interval=0.5, what="the job's progress in `eyas status`")
    assert rows[0]["bar"].endswith(" 3/10") and rows[0]["eta"] == "2.0 min"

    env = OperatorEnv(ConfigSource(running_train.config, "a test").load(), lambda name: LocalHost(), HttpClient(),
                      SYSTEM_CLOCK)  # fmt: skip
    tools = {tool_name(tool.model): tool for tool in operator_tools(env)}
    assert tools["list_jobs"].run(ListJobs()) == f"{job}: running (on ray {address}; its log: tail_log)"
    assert TAG + json.dumps(PROGRESS) in tools["tail_log"].run(TailLog(job_id=job))


@pytest.mark.slow  # the session's real Ray cluster
def test_the_jobs_command_lists_and_cancels_ray_jobs_and_the_process_stops(running_train: RunningJob) -> None:
    """`eyas jobs` with `executor = "ray"` shows the cluster's jobs of the run, and its cancel goes through Ray."""
    jobs, spec, config = running_train.jobs, running_train.spec, str(running_train.config)
    listed = json.loads(eyas("jobs", "--config", config, "--json").stdout)
    assert [(job["job_id"], job["status"], job["host"]) for job in listed] == [
        (spec.job_id, "running", f"ray {jobs.address}")
    ]
    cancelled = eyas("jobs", "--config", config, "cancel", spec.job_id)
    assert cancelled.code == 0 and f"{spec.job_id}: failed (exit 143)" in cancelled.output, cancelled.output
    assert jobs.status(spec.job_id).rc == 143
    wait_for(lambda: process_gone(running_train.pid), 60, what="the cancelled job's process to end")
    jobs.forget(spec.job_id)
    assert jobs.status(spec.job_id).status is JobStatus.ABSENT


@pytest.mark.slow  # the session's real Ray cluster
def test_a_job_killed_on_its_node_fails_with_its_exit_code(ray_cluster: RayCluster, tmp_path: Path) -> None:
    jobs = RayJobs(LocalHost(), str(tmp_path), cluster_config(ray_cluster))
    spec, pid = sleeper(jobs, "generate", tmp_path / "pid")
    os.kill(pid, signal.SIGKILL)  # the OOM killer, or an operator on the node
    state = wait_finished(jobs, spec.job_id, 120, "Ray to see the job end")
    assert state.status is JobStatus.FAILED and state.rc == 137


@pytest.mark.slow  # the session's real Ray cluster
def test_a_job_whose_node_dies_is_lost_and_a_retry_runs_it_again(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """Last in this module: it kills the worker node, then starts a new one for the retry."""
    jobs = RayJobs(LocalHost(), str(tmp_path), cluster_config(ray_cluster))
    marker, started = tmp_path / "resumed", tmp_path / "started"
    # Like a workload that resumes from its output: the second run finds the first run's marker and ends.
    script = f"if [ -e {marker} ]; then echo resumed; exit 0; fi; touch {marker} {started}; exec sleep 600"
    spec = shell(job_id("train"), script)
    jobs.launch(spec)
    wait_for(started.exists, START_S, what="the job to start on the worker node")
    try:
        ray_cluster.kill_worker()
        lost = wait_finished(jobs, spec.job_id, 120, "Ray to see the job's node die")
        assert lost.status is JobStatus.LOST
        assert "vanished without an exit code" in diagnose(lost, jobs.tail(spec.job_id))
        assert jobs.launch(spec).status is JobStatus.LOST  # no relaunch without the failure gate's retry
    finally:  # the session's cluster gets its worker node back, whatever failed above
        assert ray_cluster.worker is not None
        if ray_cluster.worker.poll() is not None:
            ray_cluster.start_worker()
    jobs.forget(spec.job_id)
    jobs.launch(spec)
    done = wait_finished(jobs, spec.job_id, START_S, "the retried job to end")
    assert done.status is JobStatus.SUCCEEDED
    assert "resumed" in jobs.tail(spec.job_id)


def test_the_config_chooses_the_executor_and_each_job_kind_its_resources_which_the_gate_shows(tmp_path: Path) -> None:
    base = {
        "hosts": {"local": {"address": "local", "python": sys.executable, "workdir": str(tmp_path)}},
        "target": {"base_url": "http://127.0.0.1:1", "model": "m"},
    }
    assert isinstance(executor_for(EyasConfig.model_validate(base), LocalHost()), Jobs)
    cluster = ClusterConfig.model_validate(
        {"executor": "ray", "ray_address": "http://127.0.0.1:1", "resources": {"extract": {"num_gpus": 1}}}
    )
    assert job_kind("run-1.extract-2") == "extract"
    assert job_resources(cluster, "run-1.extract-2").num_gpus == 1
    assert job_resources(cluster, "run-1.train").num_gpus is None
    specs = [shell("run-1.extract-0", "true"), shell("run-1.train", "true")]
    view = cluster_view(cluster, specs)
    resources = view.model_dump(mode="json")["resources"]
    assert resources == {"run-1.extract-0": {"num_gpus": 1.0, "labels": {}}, "run-1.train": {"labels": {}}}
    assert cluster_lines(view) == [
        "jobs go to the Ray cluster at http://127.0.0.1:1",
        "run-1.extract-0: num_gpus=1.0",
        "run-1.train: asks nothing (runs on the head node)",
    ]


def test_an_unreachable_ray_cluster_is_one_readable_error(tmp_path: Path) -> None:
    from eyas.tools.errors import JobError

    cluster = ClusterConfig.model_validate({"executor": "ray", "ray_address": "http://127.0.0.1:9"})
    with pytest.raises(JobError) as caught:
        RayJobs(LocalHost(), str(tmp_path), cluster)
    message = str(caught.value)
    assert "http://127.0.0.1:9" in message and "ray_address" in message and "Traceback" not in message
