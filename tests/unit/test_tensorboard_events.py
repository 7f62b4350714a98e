"""The workloads' stdlib TensorBoard writer, read back by TensorBoard's own reader: the tags, steps and values of the
training metrics, and a resumed run that adds a file whose restart hides what the killed process logged after its
checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR
from tensorboard_scalars import read_scalars

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

from tensorboard_events import crc32c
from training_metrics import FILE_NAME, TENSORBOARD_DIR, MetricsLog


def test_crc32c_is_the_castagnoli_checksum() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720, B.4)


def _train(log: MetricsLog, step: int, loss: float) -> None:
    log.write(split="train", step=step, epoch=0, loss=loss, acc=[0.5, 0.25], lr=1e-4 * step, tokens_per_s=100.0 + step)


def test_metrics_reach_tensorboard_and_a_resume_replaces_the_steps_after_its_checkpoint(tmp_path: Path) -> None:
    killed = MetricsLog(tmp_path / FILE_NAME)
    killed.rewind(0)
    for step in (1, 2, 3):
        _train(killed, step, loss=10.0 - step)
    killed.write(split="val", step=3, epoch=0, loss=7.5, acc=[0.4, 0.2])
    first_file = killed.events.path.read_bytes()

    resumed = MetricsLog(tmp_path / FILE_NAME)  # the checkpoint was at step 2; steps 3 and 4 come again
    resumed.rewind(2)
    for step in (3, 4):
        _train(resumed, step, loss=20.0 - step)

    events = tmp_path / TENSORBOARD_DIR
    assert len(list(events.iterdir())) == 2 and killed.events.path.read_bytes() == first_file  # appended, not rewritten
    scalars = read_scalars(events)
    assert set(scalars) == {
        "train/loss",
        "train/acc_0",
        "train/acc_1",
        "train/lr",
        "train/tokens_per_s",
    }  # fmt: skip  (the killed process's validation at step 3 is gone with its step 3)
    assert scalars["train/loss"] == [(1, 9.0), (2, 8.0), (3, 17.0), (4, 16.0)]
    assert scalars["train/tokens_per_s"] == [(step, 100.0 + step) for step in (1, 2, 3, 4)]
    assert [value for _, value in scalars["train/lr"]] == pytest.approx([1e-4, 2e-4, 3e-4, 4e-4])
    assert scalars["train/acc_1"] == [(step, 0.25) for step in (1, 2, 3, 4)]
