"""train.py with the target environment (torch, speculators), no server: how batches are aligned, that the CUDA
path's flags build the same drafter through speculators' own trainer, and resuming after a SIGKILL.

The CUDA path cannot run here (no GPU): its command is run without torchrun on CPU with --dry-run, where
speculators' `main` resolves every flag, loads the vocabulary and builds and saves the drafter, then stops
before its CUDA-only Trainer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from extraction import differing_tensors, noise_training_data, prepared_target, run_python
from eyas.graph.phases.train.jobs import LEARNING_RATE, TrainRequest, train_job
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobStatus
from eyas.tools.jobs.upload import WORKLOADS_DIR, upload_workloads
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.drafter_recipe import DEFAULT_RECIPE
from eyas.tools.workloads.hidden_states_file import read_header
from eyas.tools.workloads.progress import TAG
from tensorboard_scalars import read_scalars
from waiting import wait_for

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import train
import train_cuda

pytestmark = pytest.mark.slow  # runs with the target environment's Python (torch, speculators)

PROBE = Path(__file__).resolve().parents[1] / "support" / "train_probe.py"


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


def probe(target: EmbeddedTarget, *args: str | Path) -> Any:
    done = run_python(target, PROBE, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def random_data(target: EmbeddedTarget, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Seeded noise in extract.py's format, and vocab.py's mapping for it."""
    return noise_training_data(target, tmp_path_factory.mktemp("random-data"), 24)


def test_batches_are_shifted_exactly_as_speculators_shift_batch(target: EmbeddedTarget, tmp_path: Path) -> None:
    probe(target, "synthetic", "--out", tmp_path / "hs", "--samples", "2", "--pattern", "index")
    got = probe(target, "batch", "--data", tmp_path / "hs", "--work", tmp_path, "--indices", "0", "1",
                "--total-seq-len", "16")  # fmt: skip
    assert got["layer_ids"] == [2, 15, 27, 30] and got["aux_constant"]
    # Samples of 6 and 7 tokens become 5 and 6 aligned rows: row j pairs token j+1 with the aux layers of
    # token j (what the target saw when it predicted j+1) and the last layer of token j+1 (the target's
    # prediction of token j+2, the drafter's training target). Then padding to 16.
    rows = [(doc, j) for doc, length in enumerate((6, 7)) for j in range(length - 1)]
    assert got["input_ids"] == [1000 + j + 1 for _, j in rows] + [0] * 5
    assert got["aux"][: len(rows)] == [[4 * j + 0, 4 * j + 1, 4 * j + 2] for _, j in rows]
    assert got["last"][: len(rows)] == [4 * (j + 1) + 3 for _, j in rows]
    assert got["loss_mask"] == [int((j + 1) % 3 != 0) for _, j in rows] + [0] * 5
    assert got["position_ids"][: len(rows)] == [j + 1 for _, j in rows]
    assert got["document_ids"] == [doc for doc, _ in rows] + [-1] * 5


def train_args(target: EmbeddedTarget, data: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "--data", str(data["hs"]), "--verifier", str(target.model_dir), "--out", str(out),
        "--d2t", str(data["d2t"]), "--t2d", str(data["t2d"]), *extra,
    ]  # fmt: skip


def test_cuda_flags_build_the_same_drafter_through_speculators_own_trainer(
    target: EmbeddedTarget, random_data: dict[str, Path], tmp_path: Path
) -> None:
    args = train.parse_args(train_args(target, random_data, tmp_path / "cpu", "--dry-run", "--num-layers", "2"))
    args.optimizer = train.resolve_optimizer(args.optimizer, "cuda")  # as train.py's main does on a GPU host
    argv = train_cuda.speculators_argv(
        args, python=str(target.python), nproc=1, dataset=tmp_path / "staged" / "dataset",
        hidden_states=tmp_path / "staged" / "hidden_states", save_path=tmp_path / "speculators", init_drafter=None,
        checkpoint_freq=1.0, span=train_cuda.Span(epochs=args.epochs, max_steps=None, total=1000),
    )  # fmt: skip
    flags = argv[argv.index(str(WORKLOADS_DIR / "train_cuda.py")) + 1 :]
    resolved = probe(target, "resolve", *flags)
    expected = {"speculator_type": "eagle3", "num_layers": 2, "full_attention_indices": [0, 1], "on_missing": "raise"}
    assert {key: resolved[key] for key in expected} == expected
    assert resolved["d2t_path"] == str(random_data["d2t"])
    # drafter_recipe's choices: per-layer norms of the captured layers (--fc-norm), a warm-up of 5% of 1,000 steps.
    assert (resolved["norm_before_fc"], resolved["fc_norm"], resolved["norm_output"]) == (False, True, True)
    assert (resolved["loss_fn"], resolved["scheduler_warmup_steps"]) == ("kl_div", 50)

    speculators_run = run_python(target, WORKLOADS_DIR / "train_cuda.py", *flags)
    assert speculators_run.returncode == 0, speculators_run.stderr[-3000:]
    cpu_flags = train_args(target, random_data, tmp_path / "cpu", "--dry-run", "--num-layers", "2", "--device", "cpu")
    cpu_run = run_python(target, WORKLOADS_DIR / "train.py", *cpu_flags)
    assert cpu_run.returncode == 0, cpu_run.stderr[-3000:]

    theirs, ours = (json.loads((d / "config.json").read_text()) for d in (tmp_path / "speculators", tmp_path / "cpu"))
    for key in ("draft_vocab_size", "eagle_aux_hidden_state_layer_ids", "norm_before_fc", "norm_output",
                "norm_before_residual", "fc_norm", "speculators_model_type", "transformer_layer_config"):  # fmt: skip
        assert ours[key] == theirs[key], key
    assert ours["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]
    shapes = [
        {name: (entry["dtype"], entry["shape"]) for name, entry in read_header(d / "model.safetensors")[0].items()
         if name != "__metadata__"}
        for d in (tmp_path / "speculators", tmp_path / "cpu")
    ]  # fmt: skip
    assert shapes[0] == shapes[1] and shapes[0]["lm_head.weight"] == ("BF16", [256, 576])
    assert {f"fc_norm.{i}.weight" for i in range(3)} <= shapes[0].keys()
    # Both start the drafter's final norm from the target's (speculators' trainer through train_cuda's patch).
    target_norm = probe(target, "final-norm", str(target.model_dir))
    for directory in (tmp_path / "speculators", tmp_path / "cpu"):
        assert probe(target, "final-norm", str(directory)) == target_norm != [1.0] * len(target_norm)


def test_float32_muon_steps_exactly_as_torch_muon_with_a_float32_newton_schulz(target: EmbeddedTarget) -> None:
    """The CPU's Muon changes only the precision of torch's orthogonalization, which alone is off by bf16 rounding."""
    compared = probe(target, "muon")
    assert compared["max_difference"] == 0.0
    assert 0 < compared["bfloat16_difference"] < 1e-2


def test_training_resumes_after_sigkill_to_the_same_weights(
    target: EmbeddedTarget, random_data: dict[str, Path], tmp_path: Path
) -> None:
    """A job killed after its first checkpoint, launched again, ends with exactly the uninterrupted run's weights."""
    host = LocalHost()
    host_config = HostConfig(address="local", python=str(target.python), workdir=str(tmp_path / "work"))
    jobs = Jobs(host, host_config.workdir)
    workloads = upload_workloads(host, host_config.workdir)

    def spec(name: str):
        request = TrainRequest(
            hidden_states_dir=str(random_data["hs"]), model_dir=str(target.model_dir), out_dir=str(tmp_path / name),
            d2t=str(random_data["d2t"]), t2d=str(random_data["t2d"]), epochs=3, total_seq_len=128,
            ttt_steps=DEFAULT_SIZES.ttt_steps, checkpoint_every=2, val_ratio=0.1, device="cpu",
        )  # fmt: skip
        return train_job(f"train-{name}", host_config, workloads, request)

    def finished(job_id: str) -> JobStatus:
        state = jobs.status(job_id)
        return state.status if state.finished else None  # type: ignore[return-value]

    whole = spec("whole")
    jobs.launch(whole)
    assert wait_for(lambda: finished(whole.job_id), 600, interval=0.5) is JobStatus.SUCCEEDED, jobs.tail(whole.job_id)

    killed = spec("killed")
    state = jobs.launch(killed)
    checkpoints = tmp_path / "killed.work" / "checkpoints"
    wait_for(lambda: list(checkpoints.glob("step-*.pt")), 600, interval=0.05, what="the first checkpoint")
    os.killpg(state.pid, signal.SIGKILL)  # type: ignore[arg-type]
    assert wait_for(lambda: finished(killed.job_id), 60, interval=0.1) is JobStatus.LOST
    assert not (tmp_path / "killed").exists(), "the run finished before the kill; the test proves nothing"
    survivor = int(sorted(checkpoints.glob("step-*.pt"))[-1].stem.split("-")[1])

    jobs.forget(killed.job_id)
    jobs.launch(killed)
    assert wait_for(lambda: finished(killed.job_id), 600, interval=0.5) is JobStatus.SUCCEEDED, jobs.tail(killed.job_id)
    lines = [
        json.loads(line[len(TAG) :]) for line in jobs.tail(killed.job_id, 400).splitlines() if line.startswith(TAG)
    ]
    resumed = next(line for line in lines if line["phase"] == "resumed")
    first_step = next(line for line in lines if line["phase"] == "train")
    assert resumed["done"] == survivor and first_step["done"] == resumed["done"] + 1
    assert lines[-1]["phase"] == "done"
    assert differing_tensors(tmp_path / "whole" / "model.safetensors", tmp_path / "killed" / "model.safetensors") == {}
    # metrics.jsonl: every step once, in order, with the uninterrupted run's numbers; the kill repeated none.
    curves = {name: curve(tmp_path / name / "metrics.jsonl") for name in ("whole", "killed")}
    assert curves["killed"] == curves["whole"]
    train_rows = [row for row in curves["whole"] if row[0] == "train"]
    assert [row[1] for row in train_rows] == list(range(1, len(train_rows) + 1))
    # Each step's own rate: a linear warm-up over drafter_recipe's steps for this run (its floor, as 5% of a run this
    # short is one step or none), then a linear decay that ends above zero.
    rates = [row[4] for row in train_rows]
    warmup = DEFAULT_RECIPE.warmup_steps(len(train_rows))
    assert warmup > int(0.05 * len(train_rows))
    assert rates[: warmup + 1] == pytest.approx([LEARNING_RATE * step / warmup for step in range(warmup + 1)])
    assert rates[warmup:] == sorted(rates[warmup:], reverse=True) and rates[-1] > 0
    val_steps = [row[1] for row in curves["whole"] if row[0] == "val"]
    assert len(val_steps) == 3 and val_steps == sorted(val_steps) and val_steps[-1] == len(train_rows)  # each epoch
    # TensorBoard's own reader sees each step's loss once too; the resume added a file and hid what the kill left.
    assert len(list((tmp_path / "killed" / "tensorboard").glob("events.out.tfevents.*"))) == 2
    for name in ("whole", "killed"):
        losses = read_scalars(tmp_path / name / "tensorboard")["train/loss"]
        assert losses == [(row[1], pytest.approx(row[2])) for row in curves[name] if row[0] == "train"]


def curve(path: Path) -> list[tuple[Any, ...]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(row["split"], row["step"], row["loss"], row["acc"], row.get("lr", 1.0)) for row in rows]


def test_finetuning_starts_from_a_downloaded_drafter_offline(
    target: EmbeddedTarget, random_data: dict[str, Path], tmp_path: Path
) -> None:
    """A drafter whose config names its verifier by hub id is finetuned with the hub unreachable, from its weights."""
    downloaded = tmp_path / "downloaded"
    made = run_python(target, WORKLOADS_DIR / "train.py", *train_args(target, random_data, downloaded, "--dry-run"))
    assert made.returncode == 0, made.stderr[-3000:]
    config = json.loads((downloaded / "config.json").read_text())
    config["speculators_config"]["verifier"]["name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    (downloaded / "config.json").write_text(json.dumps(config))

    out = tmp_path / "finetuned"
    argv = [
        str(target.python), str(WORKLOADS_DIR / "train.py"), "--data", str(random_data["hs"]),
        "--verifier", str(target.model_dir), "--out", str(out), "--from-pretrained", str(downloaded),
        "--device", "cpu", "--max-steps", "1", "--lr", "0", "--optimizer", "adamw", "--total-seq-len", "128",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    # One step at learning rate 0: the weights are the downloaded drafter's, not a fresh init's. (Not a tiny
    # rate: AdamW moves every weight by about lr, and among fc's million weights one within 1e-9 of zero, where
    # bf16 steps are that fine, turns up about once in 20 runs and saves as another number.)
    differing = differing_tensors(out / "model.safetensors", downloaded / "model.safetensors")
    assert not differing.keys() & {"fc.weight", "layers.0.mlp.down_proj.weight", "d2t"}, differing
    finetuned = json.loads((out / "config.json").read_text())
    assert finetuned["transformer_layer_config"] == config["transformer_layer_config"]
    assert finetuned["speculators_config"]["verifier"]["name_or_path"] == str(target.model_dir.resolve())
