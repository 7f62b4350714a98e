"""`eyas run --dry-run --json` on the motivating host: a config whose unit file is the 8-GPU Kimi service
(tests/support/fixtures/vllm_kimi.service: tensor-parallel 8, --trust-remote-code, NCCL environment) and whose model
directory holds Kimi-K2's config.json. nvidia-smi is a stand-in (no GPU here, tests/support/nvidia_smi_standin.py)
for 8 GPUs at 93% in use; no server answers, so the plan reads the model's shape and weights from its directory and
states the rates it assumes. The real `eyas` command runs; nothing may be launched. The walk ends with the deploy
step: production's own argv (its layout included) plus the run's drafter, a restart of the length production takes
to load. The unit also carries secrets (an --api-key, Environment= values whose names do not say so): none reaches
the JSON. At the operator's sizes the plan counts the prompts all the same (it needs no server): the shipped set
holds 313, not the 25,000 asked, and the plan's verdict says so with the ways out."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from eyas.graph.phases.plan.node import evaluation_hours
from eyas.tools.settings.sizes import DEMO
from in_process import eyas
from nvidia_smi_standin import FIXTURES, install_nvidia_smi
from planted_secrets import AMZ_SIGNATURE, API_KEY_FLAG, AZURE_KEY, NOTIFY_TOKEN, QUERY_KEY, SHAPED_ENV, UNIT_ENV

# Issue 28's six shapes, each where an operator's host has it: a secret --api-key in production's argv, a presigned
# URL's signature there too, an AZURE_OPENAI_KEY, an Environment= value whose name says nothing and one shaped like a
# token under a name that looks harmless, and a ?key= in the target's base_url. (The sixth, a token in the policy's
# notify_command, is refused before anything runs: test_a_token_in_the_notify_command_is_refused_unshown.)
PLANTED_HERE = (API_KEY_FLAG, AMZ_SIGNATURE, AZURE_KEY, UNIT_ENV, SHAPED_ENV, QUERY_KEY)
PRESIGNED = f"https://b.s3.amazonaws.com/t?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={AMZ_SIGNATURE}"

KIMI_CONFIG = {"hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840, "intermediate_size": 18432}
# The motivating operator's sizes, with a --max-seq-len that leaves room for a prompt beside 4,096-token answers (at
# the default 4,096 the command refuses: tests/unit/test_bad_input.py), on the config's default source, the shipped set.
OPERATOR = ["--samples", "25000", "--max-tokens", "4096", "--max-seq-len", "8192"]


def kimi_host(tmp_path: Path, pipeline: str = "") -> Path:
    """The motivating host's config (the secret-carrying unit, Kimi-K2's config.json, the 8-GPU stand-in on PATH),
    with `pipeline` as its [pipeline] table."""
    model_dir = tmp_path / "Kimi-K2-Instruct"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(KIMI_CONFIG))
    unit = (FIXTURES / "vllm_kimi.service").read_text()
    unit = unit.replace(
        "--trust-remote-code \\\n",
        f"--trust-remote-code \\\n    --api-key {API_KEY_FLAG} \\\n    --otlp-traces-endpoint '{PRESIGNED}' \\\n",
    )
    unit = unit.replace(
        "[Service]\n",
        f"[Service]\nEnvironment=AZURE_OPENAI_KEY={AZURE_KEY} LICENSE_CODE={UNIT_ENV} HF_HUB_NOTE={SHAPED_ENV}\n",
    )
    assert all(secret in unit for secret in (API_KEY_FLAG, AMZ_SIGNATURE, AZURE_KEY, UNIT_ENV, SHAPED_ENV))
    (tmp_path / "vllm_kimi.service").write_text(unit)
    config = tmp_path / "eyas.toml"
    config.write_text(
        f"""[hosts.gpu]
address = "local"
python = "/srv/vllm/.venv/bin/python"
workdir = "{tmp_path / "work"}"

[target]
host = "gpu"
base_url = "http://127.0.0.1:9/v1?key={QUERY_KEY}"
model = "kimi-k2"
model_dir = "{model_dir}"
unit_file = "{tmp_path / "vllm_kimi.service"}"
load_time_s = 1320
{pipeline}"""
    )
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())
    return config


def eyas_dry_run(tmp_path: Path, config: Path, *form: str) -> str:
    """The real `eyas run --dry-run` at the operator's sizes (`form`: --json, or nothing for the text), checked to
    have launched nothing and printed no secret; what it printed. The shipped set cannot feed 25,000 samples, so a
    run of this plan would stop at its data gate: the dry run says no (exit 1)."""
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "EYAS_RUNS_DIR": str(tmp_path / "runs")}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("eyas")), "run", "--dry-run", "--config", str(config), *form, *OPERATOR],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert not [secret for secret in PLANTED_HERE if secret in done.stdout + done.stderr]
    assert not (tmp_path / "work" / "jobs").exists()  # nothing launched
    assert not (tmp_path / "runs").exists()  # and no run folder
    return done.stdout


def test_dry_run_of_the_kimi_service_shows_its_layout_on_every_server(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    config = kimi_host(tmp_path)
    walk = json.loads(eyas_dry_run(tmp_path, config, "--json"))
    phases = {phase["phase"]: phase for phase in walk["phases"]}

    # With the server down the prompts are counted all the same: the shipped set cannot feed 25,000.
    supply = walk["plan"]["prompt_supply"]
    counts = (supply["source"], supply["available"], supply["samples"], supply["asked"])
    assert counts == ("shipped", 313, 25_000, 25_064), supply
    assert supply["enough"] is False and supply["max_prompt_chars"] == (8192 - 4096) * 3
    assert "Too few prompts: the shipped prompt set holds 313 usable prompts" in walk["plan"]["verdict"]
    assert "generate 300 samples instead of 25,000" in walk["plan"]["verdict"]
    assert walk["stops"] == ["the prompt source holds too few prompts (see plan:)"]  # why it exited 1

    # Production is down: generation, which sends every request to it, waits for it (the gate's policy says no).
    assert "generation cannot run until production is up" in phases["data"]["production"]["reason"]
    extract = phases["extract"]
    assert extract["production"]["action"] == "stop", extract["production"]
    assert extract["gpus"] == list(range(8))
    assert extract["production"]["commands"][0].startswith("stand-in for systemd")
    assert walk["plan"]["production_load"] == {"load_s": 1320.0, "source": "target.load_time_s in the config"}

    servers = {**extract["servers"]["servers"], **phases["evaluate"]["servers"]["servers"]}
    # Every candidate's server: the drafter and n-gram at each k from 1 to the run's 3 (its own first).
    assert list(servers) == ["extraction", "baseline", "speculative-k3", "ngram-k3", "speculative-k1", "ngram-k1",
                             "speculative-k2", "ngram-k2"]  # fmt: skip
    for name, argv in servers.items():
        assert argv[argv.index("--tensor-parallel-size") + 1] == "8", name
        assert "--trust-remote-code" in argv and "--enable-expert-parallel" in argv, name
        assert argv[argv.index("--port") + 1] != "8000", name  # production's port stays production's
    # The baseline never serves production's drafter; the speculative server serves the run's.
    assert "--speculative-config" not in servers["baseline"]
    assert (
        "/runs/dry-run/drafter"
        in servers["speculative-k3"][servers["speculative-k3"].index("--speculative-config") + 1]
    )
    ngram = json.loads(servers["ngram-k3"][servers["ngram-k3"].index("--speculative-config") + 1])
    assert ngram["method"] == "ngram" and ngram["num_speculative_tokens"] == 3  # beside the drafter, at its k
    # Switched off, the evaluation starts no n-gram server.
    without = json.loads(eyas_dry_run(tmp_path, config, "--json", "--no-eval-ngram"))
    evaluate = next(phase for phase in without["phases"] if phase["phase"] == "evaluate")
    assert list(evaluate["servers"]["servers"]) == ["baseline", "speculative-k3", "speculative-k1", "speculative-k2"]
    # The deploy's bar names n-gram's speedup where the evaluation will measure it, and only then.
    measured_again = [step for step in phases["deploy"]["steps"] if step.startswith("measure again")]
    assert measured_again and "as the evaluation measures it (evaluate.py --ngram)" in measured_again[0]
    assert "n-gram not measured" not in measured_again[0]
    unmeasured = next(phase for phase in without["phases"] if phase["phase"] == "deploy")["steps"]
    assert any("n-gram not measured" in step for step in unmeasured)
    # The plan's time for the evaluation counts the servers it starts (here no throughput was measured: none); the
    # bench's share is test_bench_serve's.
    with_ngram = {**DEMO.model_dump(), "bench_prompts": 0}
    without_ngram = {**with_ngram, "eval_ngram": False}
    answering = DEMO.held_out * DEMO.eval_max_tokens / 10.0  # seconds at 10 tokens/s
    assert evaluation_hours({"sizes": with_ngram}, 60.0, 10.0) == pytest.approx(3 * (60 + answering) / 3600)
    assert evaluation_hours({"sizes": without_ngram}, 60.0, 10.0) == pytest.approx(2 * (60 + answering) / 3600)
    every_k = {**with_ngram, "eval_k_from": 1}  # the baseline, and the drafter and n-gram at k = 3, 1 and 2
    assert evaluation_hours({"sizes": every_k}, 60.0, 10.0) == pytest.approx(7 * (60 + answering) / 3600)
    assert "NCCL_SOCKET_IFNAME (environment)" in phases["evaluate"]["servers"]["inherited"]

    deploy = phases["deploy"]
    assert deploy["gate"] == "gate_deploy" and deploy["production"]["action"] == "restart", deploy
    assert deploy["production"]["downtime_hours"] == 1320 / 3600
    (deployed,) = deploy["servers"]["servers"].values()
    assert deployed[deployed.index("--tensor-parallel-size") + 1] == "8" and "--trust-remote-code" in deployed
    assert deployed[deployed.index("--port") + 1] == "8000"  # production itself, restarted with the drafter
    assert json.loads(deployed[deployed.index("--speculative-config") + 1]) == {
        "method": "eagle3", "model": f"{workdir}/runs/dry-run/drafter", "num_speculative_tokens": 3}  # fmt: skip
    # The planted secrets arrived, hidden: production's --api-key and presigned URL, the base_url's ?key=.
    assert deployed[deployed.index("--api-key") + 1] == "[REDACTED]"
    assert deployed[deployed.index("--otlp-traces-endpoint") + 1].endswith("&X-Amz-Signature=[REDACTED]")
    assert "--base-url 'http://127.0.0.1:9/v1?key=[REDACTED]'" in phases["data"]["jobs"][0]["command"]
    assert any("vllm_kimi.service.d/zz-eyas-drafter.conf" in step for step in deploy["steps"])
    assert deploy["production"]["commands"][0].startswith("rm -f -- ")  # the rollback

    (extraction_job,) = extract["jobs"]
    assert "--backend vllm" in extraction_job["command"] and "--inherit=" in extraction_job["command"]
    assert extraction_job["env"]["NCCL_P2P_LEVEL"] == "SYS"
    assert {"AZURE_OPENAI_KEY", "LICENSE_CODE", "HF_HUB_NOTE"} <= set(extraction_job["secrets"])  # by file, named only

    # What happens to production is what the pipeline does (graph/downtime.py, graph/window.py): extraction, training
    # and the evaluation all stop it, so they are one downtime window, stopped once before extraction and started once
    # after the evaluation; vocab.py runs on the CPU between them with production still down.
    assert phases["vocab"]["production"]["action"] == "stopped" and phases["vocab"]["gpus"] == []
    assert phases["train"]["production"]["action"] == "stop"
    assert phases["train"]["production"]["commands"] == ["(the train phase's jobs)"]
    assert phases["evaluate"]["production"]["commands"][-1].startswith("stand-in for systemd (no systemd here): run")
    (window,) = walk["plan"]["downtime_windows"]
    assert window["phases"] == ["extract", "train", "evaluate"] and window["load_s"] == 1320


def test_a_token_in_the_notify_command_is_refused_unshown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy would carry it into run.json and every gate view: the dry run refuses it, saying where to put it,
    before it plans anything, and does not print it."""
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    policy = tmp_path / "policy.toml"
    policy.write_text(f"notify_command = \"curl -d done 'https://ntfy.example.com/eyas?auth={NOTIFY_TOKEN}'\"\n")
    ran = eyas("run", "--dry-run", "--json", "--config", str(kimi_host(tmp_path)), "--policy", str(policy), *OPERATOR)
    assert ran.code == 2 and "looks like a secret" in ran.output and "environment variable" in ran.output, ran.output
    assert NOTIFY_TOKEN not in ran.output and ran.stdout == "" and not (tmp_path / "runs").exists()


# The AQ-MedAI/Kimi-K2-Instruct-eagle3 drafter's config.json (SpecForge's layout), as a directory on the host.
SPECFORGE_KIMI = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 7168, "vocab_size": 163840,
    "draft_vocab_size": 32000, "num_hidden_layers": 1, "num_attention_heads": 64, "num_key_value_heads": 8,
    "intermediate_size": 18432, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57],
                                                 "use_aux_hidden_state": True},
}  # fmt: skip


def test_the_dry_run_text_shows_verification_and_every_command_in_the_pipelines_order(tmp_path: Path) -> None:
    drafter = tmp_path / "Kimi-K2-Instruct-eagle3"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(SPECFORGE_KIMI))
    config = kimi_host(tmp_path, f'\n[pipeline]\ndrafter_base = "{drafter}"\n')
    lines = eyas_dry_run(tmp_path, config).splitlines()

    def first(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    # Verify's checks first, as a table: check, status, finding, under one header.
    table = lines[lines.index("verification:") + 1 : first("plan: ")]
    assert table[0].split() == ["check", "status", "finding"]
    rows = {name: (status, finding) for name, status, finding in (line.split(None, 2) for line in table[1:])}
    assert rows["health"][0] == "fail" and rows["health"][1].startswith("Nothing accepts connections at")
    assert rows["drafter"][0] == "ok" and rows["drafter"][1].startswith("specforge drafter (converted")
    assert {"service", "gpus", "disk", "compat"} <= set(rows)

    # Every command the pipeline runs, in its order: the drafter's preparation before the data gate (download.py
    # checks it against the target and converts it for training), the data phase's prompt split before its
    # generation, then the other phases.
    download, split, generate = (
        first("   job dry-run.download: $ "),
        first("   setup: $ "),
        first("   job dry-run.generate: $ "),
    )
    assert lines[download - 1] == (
        "drafter (downloaded, checked against the target and converted before the data gate):"
    )
    assert download < first("== data: ") < split < generate < first("== extract: ")
    argv = shlex.split(lines[split].removeprefix("   setup: $ "))
    assert argv[1].endswith("/workloads/prompt_split.py")
    assert argv[argv.index("--train") + 1] == "25000" and argv[argv.index("--max-prompt-chars") + 1] == "12288"
    argv = shlex.split(lines[download].removeprefix("   job dry-run.download: $ "))
    assert argv[1].endswith("/workloads/download.py") and argv[argv.index("--source") + 1] == str(drafter)
    assert argv[argv.index("--target") + 1] == str(tmp_path / "Kimi-K2-Instruct")
    # Extraction captures the drafter's layers, and training finetunes the one the download job made ready.
    extraction = lines[first("   job dry-run.extract: $ ")]
    assert "--layers 1,29,57" in extraction, extraction
    ready = tmp_path / "work" / "runs" / "dry-run" / "drafter-base" / "speculators"  # the download job's --ready
    assert f"--ready {ready}" in lines[download]
    assert f"--from-pretrained {ready}" in lines[first("   job dry-run.train: $ ")]
    # Production's steps: commands after "$ ", the phase's own jobs between them in words (no empty command).
    assert "   production: then the extract phase's jobs run" in lines
    assert not [line for line in lines if "$ (" in line or line.endswith("$")]
    order = [line.split(":")[0] for line in lines if line.startswith("== ")]
    assert order == ["== data", "== extract", "== vocab", "== train", "== evaluate", "== deploy"]

    # vocab: production stays stopped, as the pipeline leaves it inside the window from extraction to the evaluation.
    vocab = first("== vocab: ")
    assert lines[vocab] == "== vocab: production stopped; no GPU"
    assert lines[vocab + 1] == (
        "   the plan gives vocab no GPU; it runs inside the downtime window (extract, vocab, train, evaluate), "
        "production stopped"
    )
    # The window, once: its phases and production's load counted once (the hours are unknown: no weights here).
    assert (
        "downtime window: production down an unknown time for extract, train, evaluate, production's 22 min load "
        "counted once: stopped once before extract, started once after evaluate"
    ) in lines
