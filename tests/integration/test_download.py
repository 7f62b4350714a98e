"""download.py for real, run by the target environment's Python (huggingface_hub comes with vLLM).

The hub is the tests' own stand-in (hub_standin.py: the endpoints snapshot_download asks, served from a local
directory), since nothing can be downloaded here: a tiny sharded SpecForge drafter is fetched with offline mode
off, converted and loaded where training loads a drafter; offline mode refuses it, naming the setting, and a
drafter for another target fails the job with the reason. Where the hub must fail fast and clearly: no route, and
a hub that accepts connections but never answers. Local directories are validated for real: hand-written
safetensors files, and a drafter saved by speculators itself. Which jobs run offline, and the path the download
job writes the drafter to against the one training reads, are checked without the target.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from eyas.graph.context import ARTIFACTS
from eyas.graph.phases.data.jobs import download_spec
from eyas.graph.phases.train.node import finetune_from
from eyas.tools.jobs.request import workload_job
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, PipelineConfig, TargetConfig
from eyas.tools.target.embedded import EmbeddedTarget
from hub_standin import hub_standin
from safetensors_files import write_drafter, write_safetensors

slow = pytest.mark.slow  # runs with the target environment's Python
TESTS = Path(__file__).resolve().parents[1] / "support"
WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"
DOWNLOAD = WORKLOADS / "download.py"
REPO = "AQ-MedAI/tiny-eagle3"  # the shape of AQ-MedAI/Kimi-K2-Instruct-eagle3: SpecForge's layout, sharded


def download(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    python = str(EmbeddedTarget.from_env().python)
    return subprocess.run([python, str(DOWNLOAD), *args], capture_output=True, text=True, timeout=120, env=env)


def result_of(run: subprocess.CompletedProcess[str]) -> dict:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@slow
@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_a_local_checkpoint_is_validated_and_used_as_is(tmp_path: Path, sharded: bool) -> None:
    drafter = write_drafter(tmp_path / "drafter", sharded=sharded)
    result = result_of(download("--source", str(drafter)))
    assert result["source"] == "local" and result["path"] == str(drafter)
    assert result["tensors"] == 3 and result["parameters"] == 16 * 48 + 64 * 16 + 64
    assert result["config"]["speculators_model_type"] == "eagle3"


@slow
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
        "model.save_pretrained(out + '-sharded', max_shard_size='2MB')\n"
    )
    out = tmp_path / "speculators-drafter"
    built = subprocess.run(
        [str(target.python), "-c", script, str(target.model_dir), str(out)], capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr[-2000:]
    result = result_of(download("--source", str(out)))
    assert result["config"]["speculators_model_type"] == "eagle3" and result["config"]["draft_vocab_size"] == 64
    assert result["bytes"] == (out / "model.safetensors").stat().st_size

    # Sharded by save_pretrained itself: checked against the target and loaded as training loads it.
    sharded = result_of(download("--source", f"{out}-sharded", "--target", str(target.model_dir)))
    assert len(sharded["weights"]) > 1 and sharded["tensors"] == result["tensors"]
    assert sharded["drafter"]["converted_from"] is None and sharded["drafter"]["aux_layer_ids"] == [2, 15, 27]


@slow
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


def specforge_drafter(directory: Path, *flags: str) -> Path:
    """A tiny SpecForge-format drafter for SmolLM2, written by the target's torch (specforge_drafter.py)."""
    argv = [str(EmbeddedTarget.from_env().python), str(TESTS / "specforge_drafter.py"), "write", str(directory)]
    written = subprocess.run([*argv, *flags], capture_output=True, text=True, timeout=120)
    assert written.returncode == 0, written.stderr[-2000:]
    return directory


def hub_env(home: Path, endpoint: str, **more: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "HF_ENDPOINT": endpoint, **more}


# Where training loads a drafter: train.py stages it (stage_init_drafter) and build_drafter loads the copy; the
# tensors it holds are SpecForge's, renamed (midlayer. -> layers.0.) and read from every shard.
TRAINING_LOAD = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, sys.argv[1])
from safetensors.torch import load_file
from convert_drafter import load_weights
from train import stage_init_drafter
from train_loop import build_drafter
ready, source, verifier, work = map(Path, sys.argv[2:])
init = stage_init_drafter(ready, verifier, work / "init-drafter")
model = build_drafter(None, SimpleNamespace(num_layers=4, aux_layer_ids=[2, 15, 27]), init, None, None)
converted = load_file(str(ready / "model.safetensors"))
renamed = {name.replace("midlayer.", "layers.0."): tensor for name, tensor in load_weights(source).items()}
differing = sorted(name for name, tensor in renamed.items() if not tensor.equal(converted[name]))
print(json.dumps({"layers": list(model.target_layer_ids), "draft_vocab": model.draft_vocab_size,
                  "differing": differing, "tensors": len(renamed)}))
"""


@slow
def test_a_hub_drafter_is_downloaded_converted_and_loads_where_training_loads_it(tmp_path: Path) -> None:
    target = EmbeddedTarget.from_env()
    out = tmp_path / "drafter-base"
    with hub_standin({REPO: specforge_drafter(tmp_path / "repo", "--shards", "2")}) as hub:
        run = download("--source", REPO, "--out", str(out), "--target", str(target.model_dir),
                       env=hub_env(tmp_path, hub.url))  # fmt: skip
        assert any(request.startswith(f"GET /{REPO}/resolve/") for request in hub.requests)
    result = result_of(run)
    assert result["source"] == "hub" and result["format"] == "specforge"
    assert result["weights"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    ready = out / "speculators"
    assert result["drafter"] == {
        "path": str(ready), "format": "speculators", "converted_from": "specforge", "mapping": "speculators",
        "parameters": result["drafter"]["parameters"], "aux_layer_ids": [2, 15, 27],
    }  # fmt: skip
    config = json.loads((ready / "config.json").read_text())
    assert config["speculators_model_type"] == "eagle3"
    assert config["speculators_config"]["verifier"]["name_or_path"] == str(target.model_dir)
    assert (out / ".eyas-download.json").is_file()

    argv = [str(target.python), "-c", TRAINING_LOAD, str(WORKLOADS), str(ready), str(out), str(target.model_dir),
            str(tmp_path / "work")]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}  # as a training job on this host
    loaded = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    found = json.loads(loaded.stdout.splitlines()[-1])
    assert found == {"layers": [2, 15, 27], "draft_vocab": 256, "differing": [], "tensors": 15}


@slow
def test_a_hub_drafter_for_another_target_fails_the_download_with_the_reason(tmp_path: Path) -> None:
    """Hidden states of width 640, which SmolLM2 (576) does not have: found once fetched, before generation ends."""
    target = EmbeddedTarget.from_env()
    out = tmp_path / "drafter-base"
    with hub_standin({REPO: specforge_drafter(tmp_path / "repo", "--hidden", "640")}) as hub:
        run = download("--source", REPO, "--out", str(out), "--target", str(target.model_dir),
                       env=hub_env(tmp_path, hub.url))  # fmt: skip
    assert run.returncode == 1 and "width 640, the target's are 576" in run.stderr, run.stderr[-2000:]
    assert "drafter_base unset" in run.stderr and "Traceback" not in run.stderr
    assert not (out / "speculators").exists() and not (out / ".eyas-download.json").exists()


@slow
def test_a_typo_or_a_gated_repo_is_named_with_the_fix(tmp_path: Path) -> None:
    """huggingface_hub wraps the hub's answer (DryRunError "check your internet connection") around the cause,
    which download.py finds in the chain and names."""
    typo, gated = f"{REPO}-typo", "meta-llama/gated-drafter"
    (tmp_path / "repo").mkdir()
    with hub_standin({REPO: tmp_path / "repo", gated: tmp_path / "repo"}, gated={gated}) as hub:
        for repo, reason in ((typo, f"No such repository {typo} on {hub.url}"), (gated, f"{gated} is a gated")):
            run = download("--source", repo, "--out", str(tmp_path / "out"), env=hub_env(tmp_path, hub.url))
            message = run.stderr.strip()
            assert run.returncode == 1 and message.startswith(f"download.py: {reason}"), message
            assert "hf auth login" in message and len(message.splitlines()) == 1 and "internet" not in message


def test_an_interpreter_without_huggingface_hub_names_the_install(tmp_path: Path) -> None:
    """This machine's Python without its site-packages (-S): no huggingface_hub, as on a host whose venv lacks it."""
    argv = [sys.executable, "-S", str(DOWNLOAD), "--source", REPO, "--out", str(tmp_path / "out")]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    message = run.stderr.strip()
    assert run.returncode == 1 and message.startswith(f"download.py: {sys.executable} has no huggingface_hub"), message
    assert f"`{sys.executable} -m pip install huggingface_hub`" in message and REPO in message
    assert len(message.splitlines()) == 1


@slow
def test_offline_fails_within_seconds_with_the_fix(tmp_path: Path) -> None:
    """Offline mode refuses even a hub that answers, without asking it, and names the setting that turned it on."""
    started = time.monotonic()
    (tmp_path / "repo").mkdir()
    with hub_standin({REPO: tmp_path / "repo"}) as hub:
        env = hub_env(tmp_path, hub.url, HF_HUB_OFFLINE="1")
        offline = download("--source", REPO, "--out", str(tmp_path / "out"), env=env)
        assert not [request for request in hub.requests if REPO in request]
    assert offline.returncode == 1 and "HF_HUB_OFFLINE" in offline.stderr and "--source DIR" in offline.stderr
    message = offline.stderr.strip()
    assert "hub_offline = false" in message and len(message.splitlines()) == 1

    # No internet here: the hub's name does not resolve (or nothing routes to it).
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "0"}
    no_route = download("--source", "RedHatAI/some-drafter.eagle3", "--out", str(tmp_path / "out"), env=env)
    assert no_route.returncode == 1 and "cannot be reached" in no_route.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out" / ".eyas-download.json").exists()


def test_jobs_run_offline_only_where_the_host_config_says_so() -> None:
    online = HostConfig(address="gpu-box", python="/opt/ml/bin/python", workdir="/data/eyas")
    offline = online.model_copy(update={"hub_offline": True})
    assert workload_job("j", online, "/data/eyas/workloads", "download.py", []).env == {"PYTHONUNBUFFERED": "1"}
    env = workload_job("j", offline, "/data/eyas/workloads", "download.py", []).env
    assert env == {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    assert EmbeddedTarget.from_env().config().host().hub_offline  # this machine has no internet


def test_training_finetunes_the_drafter_the_download_job_made() -> None:
    """The job's --ready (where download.py writes the speculators-format drafter) is train.py's --from-pretrained,
    for a hub id and a directory on the host alike."""
    host = HostConfig(address="gpu-box", python="/opt/ml/bin/python", workdir="/data/eyas")
    run_dir = "/data/eyas/runs/r1"

    def context(base: str) -> SimpleNamespace:
        config = EyasConfig(
            hosts={LOCAL: host},
            target=TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir="/models/kimi"),
            pipeline=PipelineConfig(drafter_base=base),
        )
        return SimpleNamespace(config=config, artifact=lambda name: f"{run_dir}/{ARTIFACTS[name]}")

    spec = download_spec("r1.download", host, "/w", REPO, f"{run_dir}/drafter-base", "/models/kimi")
    flags = spec.argv[2:]
    assert flags == ["--source", REPO, "--out", f"{run_dir}/drafter-base", "--target", "/models/kimi",
                     "--ready", f"{run_dir}/drafter-base/speculators"]  # fmt: skip
    assert finetune_from(context(REPO)) == flags[-1]  # type: ignore[arg-type]

    # A directory on the host is left as it is: the drafter training takes is made in the run's folder all the same.
    directory = "/data/kimi-drafter"
    ready = f"{run_dir}/drafter-base/speculators"
    flags = download_spec("r1.download", host, "/w", directory, directory, "/models/kimi", ready).argv[2:]
    assert flags == ["--source", directory, "--out", directory, "--target", "/models/kimi", "--ready", ready]
    assert finetune_from(context(directory)) == ready  # type: ignore[arg-type]


@pytest.fixture
def silent_hub() -> Iterator[str]:
    """A TCP endpoint that accepts connections and never answers: a hub behind a broken proxy."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@slow
def test_a_hub_that_never_answers_fails_within_the_deadline(tmp_path: Path, silent_hub: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": silent_hub}
    started = time.monotonic()
    run = download("--source", "org/drafter", "--out", str(tmp_path / "out"), "--connect-timeout", "1", env=env)
    assert run.returncode == 1 and "no answer within 6 s" in run.stderr
    assert time.monotonic() - started < 30
