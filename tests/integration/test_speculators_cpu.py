"""speculators' own Trainer on a CPU (train.py --trainer speculators, patched by speculators_cpu.py), against eyas's
CPU loop on the same data and seed; the target environment's Python, no server.

The Trainer runs as on a GPU host: train_cuda.py's command under torchrun, one gloo rank, DDP, its own data loading,
schedule and checkpoints. Only the CPU flags and speculators_cpu's patches differ.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from extraction import differing_tensors, noise_training_data, prepared_target, run_python
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import TAG

pytestmark = pytest.mark.slow  # runs with the target environment's Python (torch, speculators)


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


@pytest.fixture(scope="module")
def random_data(target: EmbeddedTarget, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return noise_training_data(target, tmp_path_factory.mktemp("random-data"), 24)


def train(target: EmbeddedTarget, data: dict[str, Path], out: Path, trainer: str, *flags: str) -> list[dict[str, Any]]:
    """train.py on the CPU with `trainer`, 128-token steps (six an epoch on this data); its progress lines."""
    done = run_python(
        target, WORKLOADS_DIR / "train.py", "--data", data["hs"], "--verifier", target.model_dir, "--out", out,
        "--d2t", data["d2t"], "--t2d", data["t2d"], "--device", "cpu", "--trainer", trainer, "--total-seq-len", "128",
        "--val-ratio", "0.1", *flags,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line[len(TAG) :]) for line in done.stdout.splitlines() if line.startswith(TAG)]


def rows(out: Path, split: str) -> list[dict[str, Any]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [row for row in map(json.loads, lines) if row["split"] == split]


def test_speculators_trainer_on_a_cpu_takes_eyas_loops_steps_to_the_same_drafter(
    target: EmbeddedTarget, random_data: dict[str, Path], tmp_path: Path
) -> None:
    lines = train(target, random_data, tmp_path / "speculators", "speculators", "--epochs", "3", "--max-steps", "8")
    train(target, random_data, tmp_path / "eyas", "eyas", "--epochs", "3", "--max-steps", "8")

    staged = next(line for line in lines if line["phase"] == "staged")
    assert (staged["device"], staged["trainer"]) == ("cpu", "speculators")
    command = next(line for line in lines if line["phase"] == "launch")["command"]
    assert command[command.index("--nproc-per-node=1") + 1] == str(WORKLOADS_DIR / "train_cuda.py")
    # Six steps an epoch here: 8 steps end in the second of the 3 epochs, which the command stops at (speculators'
    # trainer would take a step more in each further epoch), and the decay ends at step 8.
    flag = {name: command[command.index(name) + 1] for name in ("--epochs", "--max-steps", "--scheduler-total-steps")}
    assert flag == {"--epochs": "2", "--max-steps": "8", "--scheduler-total-steps": "8"}

    theirs, ours = rows(tmp_path / "speculators", "train"), rows(tmp_path / "eyas", "train")
    assert [row["step"] for row in theirs] == [row["step"] for row in ours] == list(range(1, 9))
    assert [row["epoch"] for row in theirs] == [0] * 6 + [1] * 2
    for mine, other in zip(ours, theirs, strict=True):  # eyas's loop rounds to 4 places
        assert other["loss"] == pytest.approx(mine["loss"], abs=1e-4), mine["step"]
        assert other["acc"] == pytest.approx(mine["acc"], abs=1e-4), mine["step"]
        assert other["lr"] == pytest.approx(mine["lr"]), mine["step"]
    assert theirs[-1]["acc"][0] > 0.1  # the drafter learned something: the comparison is not of untrained noise
    # Both validate the first epoch alike; the Trainer validates the one --max-steps cut short as well.
    val_theirs, val_ours = rows(tmp_path / "speculators", "val"), rows(tmp_path / "eyas", "val")
    assert [row["step"] for row in val_theirs] == [6, 8] and [row["step"] for row in val_ours] == [6]
    assert val_theirs[0]["loss"] == pytest.approx(val_ours[0]["loss"], abs=1e-4)
    # The very same drafter, weight for weight.
    saved = [tmp_path / name / "model.safetensors" for name in ("speculators", "eyas")]
    assert differing_tensors(*saved) == {}


def test_speculators_trainer_on_a_cpu_resumes_from_its_checkpoint(
    target: EmbeddedTarget, random_data: dict[str, Path], tmp_path: Path
) -> None:
    """A rerun resumes from the newest checkpoint, loaded onto the CPU (speculators_cpu.cpu_for_resume; unpatched,
    onto "cuda:0"), and trains the epochs after it as the uninterrupted run did."""
    out = tmp_path / "drafter"
    train(target, random_data, out, "speculators", "--epochs", "2")
    whole = rows(out, "train")
    checkpoints = tmp_path / "drafter.work" / "speculators"
    # As if the run had died during its second epoch: only the first epoch's checkpoint is left.
    shutil.rmtree(checkpoints / "1")
    (checkpoints / "epoch1_end").unlink()
    (checkpoints / "checkpoint_best").unlink()
    (checkpoints / "checkpoint_best").symlink_to("0")
    shutil.rmtree(out)

    lines = train(target, random_data, out, "speculators", "--epochs", "2")
    steps = [line for line in lines if line["phase"] == "train"]
    assert [line["done"] for line in steps] == list(range(7, 13)) and {line["epoch"] for line in steps} == {1}
    # The same batches at the same rates from the checkpoint's weights; speculators keeps them in bf16, so the
    # losses agree to bf16's rounding, not exactly (eyas's own loop resumes bit for bit).
    for line, row in zip(steps, whole[6:], strict=True):
        assert line["loss"] == pytest.approx(row["loss"], rel=1e-2) and line["acc"] == pytest.approx(
            row["acc"], abs=0.02
        )
    assert (out / "model.safetensors").is_file()
