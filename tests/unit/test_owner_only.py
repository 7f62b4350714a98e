"""What eyas makes on a host is its owner's alone: a run's data and whatever a job writes (0600 files, 0700
folders, under the usual umask 022 of the shell that starts them), and production's drop-in (it holds the whole
command line). A production that runs as another user (User=) is let read the drafter, and nothing else."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.graph.context import RunContext
from eyas.graph.phases.data.node import setup
from eyas.graph.runs import RunDir
from eyas.tools.checks.result import CheckResult, Status
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.service.deploy import drop_in_text, share_drafter_command, write_drop_in
from eyas.tools.service.standin import UnitJobService
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.workloads.speculative import drafter_config
from waiting import wait_for


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most hosts' shells have, so every mode below is eyas's doing."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(root: Path) -> dict[str, int]:
    return {str(path.relative_to(root)): mode(path) for path in [root, *root.rglob("*")]}


def test_what_a_job_writes_is_owner_only(tmp_path: Path) -> None:
    run_data = tmp_path / "runs" / "r1" / "data"
    # The way a workload writes: folders and files with the default modes, from the shell and from Python.
    script = (
        f"mkdir -p {run_data}/shard && echo row > {run_data}/shard/part.jsonl && "
        f"{sys.executable} -c \"import pathlib; pathlib.Path('{run_data}/summary.json').write_text('{{}}')\""
    )
    jobs = Jobs(LocalHost(), str(tmp_path))
    jobs.launch(JobSpec(job_id="writer", argv=["/bin/sh", "-c", script]))
    state = wait_for(lambda: (s := jobs.status("writer")).finished and s, 30, what="the job to end")
    assert state.status is JobStatus.SUCCEEDED, (tmp_path / "jobs" / "writer" / "log").read_text()

    assert modes(tmp_path / "runs") == {
        ".": 0o700, "r1": 0o700, "r1/data": 0o700, "r1/data/shard": 0o700,
        "r1/data/shard/part.jsonl": 0o600, "r1/data/summary.json": 0o600,
    }  # fmt: skip
    job = modes(tmp_path / "jobs")
    assert job.pop(".") == job.pop("writer") == job.pop("writer/run.sh") == 0o700
    assert set(job.values()) == {0o600}, job  # its log, pid, rc, job.json


def test_a_runs_prompts_are_owner_only(tmp_path: Path) -> None:
    """The data phase's setup writes the prompt set and splits it on the host itself, not as a job."""
    workdir = tmp_path / "work"
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(workdir))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m"),
    )
    ctx = RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK,
                     run=RunDir(tmp_path / "r1"), policy=None)  # fmt: skip
    upload_workloads(ctx.host, str(workdir))
    summary = setup(ctx, {"sizes": {"samples": 8, "held_out": 2, "prompt_source": "shipped"}})["prompts"]
    assert summary["train"] == 8 and summary["held_out"] == 2

    run_folder = Path(ctx.remote_run_dir)
    assert modes(run_folder.parent) == {
        ".": 0o700, "r1": 0o700, "r1/data": 0o700, "r1/data/prompt-set.jsonl": 0o600,
        "r1/data/prompts.jsonl": 0o600, "r1/data/held-out.jsonl": 0o600,
    }  # fmt: skip


def healthy() -> CheckResult:
    return CheckResult(name="health", status=Status.OK, message="up")


def test_the_drop_in_is_owner_only_and_the_stand_in_runs_it(tmp_path: Path) -> None:
    unit_file = tmp_path / "production.service"
    started = tmp_path / "started"
    unit_file.write_text(f"[Service]\nExecStart=/bin/sh -c 'echo \"$@\" > {started}' production\n")
    service = UnitJobService(LocalHost(), str(unit_file), str(tmp_path), "production", healthy, SYSTEM_CLOCK)
    text, argv = drop_in_text(service.effective_unit(), drafter_config("/data/drafter", 3))

    write_drop_in(service, service.drop_in_path(), text)
    assert mode(Path(service.drop_in_path())) == 0o600
    assert service.effective_unit().exec_start == argv  # the stand-in, as its owner, reads it
    service.start()
    wait_for(started.exists, 30, what="production to start with the drop-in")
    assert started.read_text().split()[-2:] == ["--speculative-config", argv[-1]]


def test_a_production_of_another_user_may_read_the_drafter_and_nothing_else(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # the host's folder above eyas's work directory, open to others as most are
    run = tmp_path / "work" / "runs" / "r1"
    jobs = Jobs(LocalHost(), str(tmp_path / "work"))
    script = f"mkdir -p {run}/data {run}/drafter && echo w > {run}/drafter/model.safetensors && echo p > {run}/data/p"
    jobs.launch(JobSpec(job_id="train", argv=["/bin/sh", "-c", script]))
    wait_for(lambda: jobs.status("train").finished, 30, what="the job to end")
    assert mode(run / "drafter") == 0o700

    mine = parse_unit_file("[Service]\nExecStart=/bin/vllm serve m\n")
    assert share_drafter_command(mine, str(run / "drafter")) is None  # production runs as eyas's user
    theirs = parse_unit_file("[Service]\nUser=vllm-production\nExecStart=/bin/vllm serve m\n")
    share = share_drafter_command(theirs, str(run / "drafter"))
    assert share is not None
    LocalHost().run(share, timeout=30).check("sharing the drafter")

    assert mode(run / "drafter") == 0o755 and mode(run / "drafter" / "model.safetensors") == 0o644
    assert mode(run) == mode(run.parent) == mode(run.parent.parent) == 0o711  # passable, not listable
    assert mode(tmp_path) == 0o755  # the walk up ends at the first folder others may pass
    assert mode(run / "data") == 0o700 and mode(run / "data" / "p") == 0o600  # the run's data stays closed
