from pathlib import Path

import pytest

from eyas.tools.launch.unit_file import parse_unit_file, parse_vllm_argv

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def test_kimi_unit_with_drop_in() -> None:
    unit = parse_unit_file((FIXTURES / "vllm_kimi.service").read_text())
    assert unit.user == "vllm"
    assert unit.working_directory == "/srv/vllm"
    assert unit.environment_files == ["/etc/default/vllm"]
    assert unit.environment == {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "NCCL_DEBUG": "INFO",  # the drop-in's value wins
        "NCCL_P2P_LEVEL": "SYS",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_CUMEM_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "ens1f0",
        "HF_HOME": "/data/hf",
        "VLLM_CACHE_ROOT": "/data/vllm-cache",
    }
    # The empty ExecStart= in the drop-in replaced the base command; the "-" prefix is not argv.
    assert unit.exec_start[:4] == [
        "/srv/vllm/.venv/bin/vllm",
        "serve",
        "/data/models/Kimi-K2-Instruct",
        "--served-model-name",
    ]
    vllm = unit.vllm
    assert vllm is not None
    assert vllm.executable == "/srv/vllm/.venv/bin/vllm"
    assert (vllm.model, vllm.served_model_name, vllm.host, vllm.port) == (
        "/data/models/Kimi-K2-Instruct",
        "kimi-k2",
        "0.0.0.0",
        8000,
    )
    assert (vllm.tensor_parallel_size, vllm.max_model_len) == (8, 131072)
    assert vllm.speculative_config == {
        "method": "eagle3",
        "model": "/data/drafters/kimi-k2-eagle3",
        "num_speculative_tokens": 3,
    }
    assert vllm.flags["--enable-expert-parallel"] is True
    assert vllm.flags["--gpu-memory-utilization"] == "0.92"
    assert vllm.flags["--tool-call-parser"] == "kimi_k2"
    assert vllm.positional == ["/data/models/Kimi-K2-Instruct"]


def test_api_server_module_underscored_flags_and_bad_json() -> None:
    unit = parse_unit_file(
        "[Service]\n"
        "Environment=A=1\n"
        "Environment=\n"  # an empty assignment resets the list
        "Environment='B=two words'\n"
        "ExecStart=@/opt/venv/bin/python3 vllm-api -u -m vllm.entrypoints.openai.api_server \\\n"
        "# comment lines inside a continuation are skipped\n"
        "  --model Qwen/Qwen3-8B --max_model_len=8192 --port $PORT --enforce-eager \\\n"
        "  --speculative-config {not-json}\n"
    )
    assert unit.environment == {"B": "two words"}
    assert unit.exec_start[:2] == ["/opt/venv/bin/python3", "-u"]
    vllm = unit.vllm
    assert vllm is not None
    assert (vllm.executable, vllm.model, vllm.max_model_len) == ("/opt/venv/bin/python3", "Qwen/Qwen3-8B", 8192)
    assert vllm.port is None  # expanded by systemd at start, unknown here
    assert vllm.flags["--port"] == "$PORT"
    assert vllm.flags["--enforce-eager"] is True
    assert vllm.speculative_config is None
    assert vllm.flags["--speculative-config"] == "{not-json}"


def test_vllm_inside_a_shell_wrapper() -> None:
    script = "source /opt/venv/bin/activate && exec vllm serve --port 8001 -tp 2 org/model 2>&1 | tee log"
    vllm = parse_vllm_argv(["/bin/bash", "-lc", script])
    assert vllm is not None
    assert (vllm.executable, vllm.port, vllm.tensor_parallel_size) == ("vllm", 8001, 2)
    assert vllm.model == "org/model"
    assert vllm.positional == ["org/model"]  # the redirection and the pipe are the shell's, not vLLM's


def test_non_vllm_units_and_missing_exec_start() -> None:
    assert parse_unit_file("[Service]\nExecStart=/usr/sbin/sshd -D\n").vllm is None
    with pytest.raises(ValueError, match=r"no ExecStart= in the \[Service\] section"):
        parse_unit_file("[Unit]\nExecStart=/bin/true\n[Service]\nExecStart=/bin/true\nExecStart=\n")
    with pytest.raises(ValueError, match=r"Environment= value cannot be split.*No closing quotation"):
        parse_unit_file('[Service]\nEnvironment="A=1\nExecStart=/bin/true\n')


def test_serve_positional_model_beats_model_flag_as_in_vllm() -> None:
    vllm = parse_vllm_argv(["/usr/bin/env", "uv", "run", "vllm", "serve", "org/a", "--model", "org/b"])
    assert vllm is not None
    assert (vllm.model, vllm.flags["--model"]) == ("org/a", "org/b")
