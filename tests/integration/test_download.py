"""download.py for real, run by the target environment's Python (huggingface_hub comes with vLLM).

Nothing can be downloaded here, so the hub path is tested where it must fail fast and clearly: offline
(HF_HUB_OFFLINE, no route) and a hub that accepts connections but never answers. Local directories are
validated for real: hand-written safetensors files, and a drafter saved by speculators itself.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.tools.target.embedded import EmbeddedTarget
from safetensors_files import write_drafter, write_safetensors

pytestmark = pytest.mark.slow  # runs with the target environment's Python
DOWNLOAD = Path(__file__).resolve().parents[2] / "tools" / "workloads" / "download.py"


def download(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    python = str(EmbeddedTarget.from_env().python)
    return subprocess.run([python, str(DOWNLOAD), *args], capture_output=True, text=True, timeout=120, env=env)


def result_of(run: subprocess.CompletedProcess[str]) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_a_local_checkpoint_is_validated_and_used_as_is(tmp_path: Path, sharded: bool) -> None:
    drafter = write_drafter(tmp_path / "drafter", sharded=sharded)
    result = result_of(download("--source", str(drafter)))
    assert result["source"] == "local" and result["path"] == str(drafter)
    assert result["tensors"] == 3 and result["parameters"] == 16 * 48 + 64 * 16 + 64
    assert result["config"]["speculators_model_type"] == "eagle3"


def test_a_drafter_saved_by_speculators_is_accepted(tmp_path: Path) -> None:
    target = EmbeddedTarget.from_env()
    script = (
        "import sys, torch\n"
        "from speculators.models.eagle3 import Eagle3DraftModel\n"
        "from speculators.train.cli import create_transformer_layer_config\n"
        "verifier, out = sys.argv[1], sys.argv[2]\n"
        "layer = create_transformer_layer_config(verifier_name_or_path=verifier, num_layers=1, draft_arch='llama',"
        " hidden_act='silu', sliding_window=2048, full_attention_indices=[0])\n"
        "t2d = torch.zeros(layer.vocab_size, dtype=torch.bool); t2d[:64] = True\n"
        "model = Eagle3DraftModel.from_training_args(layer, t2d=t2d, d2t=torch.zeros(64, dtype=torch.long),"
        " verifier_name_or_path=verifier, target_layer_ids=[2, 15, 27], draft_vocab_size=64,"
        " norm_before_residual=True, norm_before_fc=True, norm_output=True, ttt_steps=3, draft_attn_impl='sdpa')\n"
        "model.save_pretrained(out)\n"
    )
    out = tmp_path / "speculators-drafter"
    built = subprocess.run(
        [str(target.python), "-c", script, str(target.model_dir), str(out)], capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr[-2000:]
    result = result_of(download("--source", str(out)))
    assert result["config"]["speculators_model_type"] == "eagle3" and result["config"]["draft_vocab_size"] == 64
    assert result["bytes"] == (out / "model.safetensors").stat().st_size


def test_broken_checkpoints_are_refused_naming_the_file(tmp_path: Path) -> None:
    truncated = write_drafter(tmp_path / "truncated")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])
    missing_shard = write_drafter(tmp_path / "missing", sharded=True)
    (missing_shard / "model-00002-of-00002.safetensors").unlink()
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    (no_weights / "pytorch_model.bin").write_bytes(b"x")
    wrong_index = write_drafter(tmp_path / "wrong-index", sharded=True)
    write_safetensors(wrong_index / "model-00002-of-00002.safetensors", {"other": ("F32", [2])})

    cases = {
        truncated: "truncated",
        missing_shard: "lacks the shard model-00002-of-00002.safetensors",
        no_weights: "no model.safetensors",
        wrong_index: "do not hold the tensors their index names",
        tmp_path / "absent": "neither an existing directory nor a hub repo id",
    }
    for directory, problem in cases.items():
        run = download("--source", str(directory))
        assert run.returncode == 1 and problem in run.stderr, (directory, run.stderr)


def test_offline_fails_within_seconds_with_the_fix(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    started = time.monotonic()
    offline = download("--source", "RedHatAI/some-drafter.eagle3", "--out", str(tmp_path / "out"), env=env)
    assert offline.returncode == 1 and "HF_HUB_OFFLINE" in offline.stderr and "--source DIR" in offline.stderr

    # No internet here: the hub's name does not resolve (or nothing routes to it).
    no_route = download(
        "--source", "RedHatAI/some-drafter.eagle3", "--out", str(tmp_path / "out"), env={**env, "HF_HUB_OFFLINE": "0"}
    )
    assert no_route.returncode == 1 and "cannot be reached" in no_route.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out" / ".eyas-download.json").exists()


@pytest.fixture
def silent_hub() -> Iterator[str]:
    """A TCP endpoint that accepts connections and never answers: a hub behind a broken proxy."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_hub_that_never_answers_fails_within_the_deadline(tmp_path: Path, silent_hub: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": silent_hub}
    started = time.monotonic()
    run = download("--source", "org/drafter", "--out", str(tmp_path / "out"), "--connect-timeout", "1", env=env)
    assert run.returncode == 1 and "no answer within 6 s" in run.stderr
    assert time.monotonic() - started < 30
