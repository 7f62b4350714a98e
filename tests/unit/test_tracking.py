"""MLflow or W&B beside TensorBoard: the training metrics log tracked in a real MLflow (mlflow-skinny, a file store
in the test's folder: fully offline), a resume that continues the same tracked run, a tracker missing from the
environment or refusing to start said in one line while TensorBoard goes on, and the job that carries the config's
tracker to train.py with its token by file, never on the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from eyas.graph.phases.train.jobs import TrainRequest, train_job
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.settings.config import HostConfig, TrackingConfig

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import train
from tracking import RUN_FILE, SETTINGS_ENV, TrackingSettings
from training_metrics import FILE_NAME, TENSORBOARD_DIR, MetricsLog, tracked_log


def _step(log: MetricsLog, step: int, loss: float) -> None:
    log.write(split="train", step=step, epoch=0, loss=loss, acc=[0.5], lr=1e-3, tokens_per_s=100.0 * step)


def test_mlflow_gets_the_tensorboard_scalars_and_a_resume_continues_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this opt-in
    settings = TrackingSettings(mlflow_uri=uri, experiment="eyas-tests", run_name="run-1", params={"epochs": 2})
    monkeypatch.setenv(SETTINGS_ENV, settings.to_env())
    work = tmp_path / "work"
    first = tracked_log(work / FILE_NAME)
    first.rewind(0)
    for step in (1, 2):
        _step(first, step, loss=10.0 - step)
    first.write(split="val", step=2, epoch=0, loss=7.5, acc=[0.4])
    # Killed after its checkpoint at step 1: the rerun logs step 2 again and goes on, into the same MLflow run.
    second = tracked_log(work / FILE_NAME)
    second.rewind(1)
    _step(second, 2, loss=6.0)
    _step(second, 3, loss=5.0)
    second.close()

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("eyas-tests")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert (run.info.run_name, run.info.status, run.data.params) == ("run-1", "FINISHED", {"epochs": "2"})
    assert (work / RUN_FILE).read_text() == f'{{"mlflow": "{run.info.run_id}"}}'
    loss = [(metric.step, metric.value) for metric in client.get_metric_history(run.info.run_id, "train/loss")]
    assert sorted(loss) == [(1, 9.0), (2, 6.0), (2, 8.0), (3, 5.0)]  # MLflow keeps both values of the step redone
    assert {metric.step for metric in client.get_metric_history(run.info.run_id, "train/tokens_per_s")} == {1, 2, 3}
    assert [metric.value for metric in client.get_metric_history(run.info.run_id, "val/loss")] == [7.5]
    assert len(list((work / TENSORBOARD_DIR).iterdir())) == 2  # TensorBoard's files are written as before


SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from training_metrics import tracked_log
log = tracked_log(Path(sys.argv[2]))
for step in (1, 2):
    log.write(split="train", step=step, epoch=0, loss=1.0, acc=[0.5])
log.close()
"""


def test_a_tracker_missing_from_the_environment_is_one_line_and_training_goes_on(tmp_path: Path) -> None:
    # -S: Python without site-packages, where no tracker is installed, as on a host without one.
    env = {**os.environ, SETTINGS_ENV: TrackingSettings(wandb_project="drafters").to_env()}
    argv = [sys.executable, "-S", "-c", SCRIPT, str(WORKLOADS_DIR), str(tmp_path / FILE_NAME)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("eyas tracking: wandb is not installed in this environment"), lines
    assert "pip install wandb" in lines[0]
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == 2
    assert len(list((tmp_path / TENSORBOARD_DIR).iterdir())) == 1


def test_a_tracker_that_refuses_the_run_is_one_line_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, TrackingSettings(mlflow_uri="nosuch-scheme://tracker").to_env())
    log = tracked_log(tmp_path / FILE_NAME)
    _step(log, 1, loss=1.0)
    log.close()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eyas tracking: mlflow would not start a run ("), lines
    assert "nosuch-scheme" in lines[0]
    assert len((tmp_path / FILE_NAME).read_text().splitlines()) == 1


HOST = HostConfig(address="gpu-box", python="/opt/ml/bin/python", workdir="/data/eyas")


def test_the_train_job_names_the_tracker_and_passes_its_token_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_MLFLOW_TOKEN", "s3cret-token")
    tracking = TrackingConfig(
        mlflow_uri="https://mlflow.example:5000", experiment="drafters", token_env="MY_MLFLOW_TOKEN"
    )
    request = TrainRequest(
        hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/drafter", epochs=1, total_seq_len=256, ttt_steps=3,
        tracking=tracking, run_name="run-20261201-100000-aaaa",
    )  # fmt: skip
    spec = train_job("run1-train", HOST, "/data/eyas/workloads", request)
    args = train.parse_args(spec.argv[2:])
    assert (args.mlflow_uri, args.mlflow_experiment, args.wandb_project, args.run_name) == (
        "https://mlflow.example:5000", "drafters", None, "run-20261201-100000-aaaa",
    )  # fmt: skip
    assert spec.secrets == {"MLFLOW_TRACKING_TOKEN": "s3cret-token"}
    assert "s3cret-token" not in " ".join(spec.argv) and "s3cret-token" not in str(spec.env)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({}, "name one tracker"),
        ({"mlflow_uri": "http://x:5000", "wandb_project": "p"}, "name one tracker"),
        ({"mlflow_uri": "https://user:pw@mlflow.example"}, "holds credentials"),
    ],
)
def test_the_tracking_section_refuses_what_cannot_work(fields: dict[str, str], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        TrackingConfig(**fields)
