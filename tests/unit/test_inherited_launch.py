"""eyas's own vLLM servers start from production's launch: the motivating Kimi unit's parallel layout, flags and
NCCL/CUDA environment are kept, only what each server must set is replaced, and the gate is told what was
inherited, overridden and dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_job, evaluate_sizes
from eyas.tools.launch.inherited import inherit_launch, ready_timeout_s
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.workloads.extract_server import extraction_argv
from eyas.tools.workloads.vllm_server import merge_flags, server_env

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
KIMI = parse_unit_file((FIXTURES / "vllm_kimi.service").read_text())
HOST = HostConfig(address="local", python="/srv/vllm/.venv/bin/python", workdir="/data/eyas")


def test_kimi_launch_keeps_layout_flags_and_environment() -> None:
    launch = inherit_launch(KIMI, ("--seed", "--speculative-config"))
    flags = dict(launch.flags)
    assert flags["--tensor-parallel-size"] == "8" and flags["--max-model-len"] == "131072"
    assert flags["--gpu-memory-utilization"] == "0.92" and flags["--served-model-name"] == "kimi-k2"
    assert "--trust-remote-code" in flags and flags["--trust-remote-code"] is None
    # eyas's own port and host, and production's drafter never reaches a baseline server.
    assert not {"--host", "--port", "--speculative-config"} & set(flags)
    assert launch.env["NCCL_DEBUG"] == "INFO" and launch.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert "--port (production: 8000)" in launch.overridden and "--host (production: 0.0.0.0)" in launch.overridden
    assert any(item.startswith("--speculative-config (production: {") for item in launch.overridden)
    assert any(item.startswith("EnvironmentFile=/etc/default/vllm") for item in launch.dropped)


def test_a_key_and_tls_are_dropped_and_short_flags_are_understood() -> None:
    unit = parse_unit_file(
        "[Service]\nExecStart=/v/bin/vllm serve /m -tp 4 --api-key s3cret --ssl-keyfile /k --max_model_len=8192\n"
    )
    launch = inherit_launch(unit)
    assert launch.flags == [("--tensor-parallel-size", "4"), ("--max-model-len", "8192")]
    assert [item.split(":")[0] for item in launch.dropped] == ["--api-key", "--ssl-keyfile"]
    assert "s3cret" not in launch.job_argument()


def test_vllms_key_in_the_environment_is_dropped_like_the_flag() -> None:
    """vLLM takes VLLM_API_KEY as --api-key: inherited, it would make eyas's own servers refuse eyas's clients
    (which send no key) with 401 on every request. The rest of the environment is inherited."""
    unit = parse_unit_file(
        "[Service]\nEnvironment=VLLM_API_KEY=s3cret NCCL_DEBUG=WARN\nExecStart=/v/bin/vllm serve /m -tp 8\n"
    )
    launch = inherit_launch(unit)
    assert launch.env == {"NCCL_DEBUG": "WARN"}
    assert "VLLM_API_KEY (environment): eyas's own servers listen on 127.0.0.1 only and take no key" in launch.dropped
    assert "NCCL_DEBUG (environment)" in launch.inherited and "s3cret" not in launch.model_dump_json()


def test_a_key_in_the_jobs_own_environment_does_not_reach_eyas_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's environment (or the host's login shell) may hold production's VLLM_API_KEY: the workloads' servers
    drop it, keep the rest, and an environment given whole (the embedded target's) is taken as given."""
    monkeypatch.setenv("VLLM_API_KEY", "s3cret")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    env = server_env(cpu=False)
    assert "VLLM_API_KEY" not in env and env["NCCL_DEBUG"] == "WARN"
    assert server_env({"VLLM_API_KEY": "given"}, cpu=False)["VLLM_API_KEY"] == "given"


def test_no_unit_inherits_nothing_and_says_why() -> None:
    launch = inherit_launch(None)
    assert launch.flags == [] and launch.env == {} and launch.dropped == ["no production unit was read"]


def test_merge_replaces_what_a_server_sets_itself() -> None:
    inherited = [["--dtype", "bfloat16"], ["--trust-remote-code", None], ["--port", "8000"]]
    assert merge_flags(inherited, "--dtype", "float32") == ["--trust-remote-code", "--dtype", "float32"]


def test_evaluation_job_passes_the_launch_and_a_timeout_from_the_load_time() -> None:
    launch = inherit_launch(KIMI, ("--seed", "--speculative-config"))
    request = EvaluateRequest(
        model_dir="/data/models/Kimi-K2-Instruct", drafter_dir="/data/eyas/runs/r/drafter", prompts="/data/p.jsonl",
        out="/data/eyas/runs/r/evaluation.json", launch=launch, start_timeout_s=ready_timeout_s(22 * 60),
        **evaluate_sizes(DEFAULT_SIZES),
    )  # fmt: skip
    spec = evaluate_job("r.evaluate", HOST, "/data/eyas/workloads", request)
    inherit = next(arg for arg in spec.argv if arg.startswith("--inherit="))
    assert ["--tensor-parallel-size", "8"] in json.loads(inherit.removeprefix("--inherit="))
    assert spec.argv[spec.argv.index("--start-timeout") + 1] == "2580.0"  # 22 min x 1.5 + 10 min, never 900
    assert spec.env["NCCL_SOCKET_IFNAME"] == "ens1f0" and spec.env["VLLM_NO_USAGE_STATS"] == "1"


def test_extraction_server_keeps_production_context_and_name() -> None:
    launch = inherit_launch(KIMI, ("--speculative-config", "--kv-transfer-config"))
    pairs = [list(pair) for pair in launch.flags]
    argv = extraction_argv("/py", "/m", [2, 30, 58, 61], "/s", 9000, 4097, "stock", pairs)
    assert argv[argv.index("--max-model-len") + 1] == "131072" and argv.count("--max-model-len") == 1
    assert argv[argv.index("--served-model-name") + 1] == "kimi-k2"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8" and "--trust-remote-code" in argv
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "extract_hidden_states"
    # The online server beside speculators' trainer (CUDA) serves as the verifier path, the name its dataset checks.
    online = extraction_argv("/py", "/m", [2, 30, 58, 61], "/s", 9000, 4097, "stock", pairs, served_name="/m")
    assert online[online.index("--served-model-name") + 1] == "/m" and online.count("--served-model-name") == 1
