"""MLflow or W&B beside the TensorBoard files, when train.py is told to log there (--mlflow-uri, --wandb-project) and
the package is installed in this environment (eyas installs neither: `pip install mlflow-skinny` or `wandb` in the
host's environment). The same scalars as TensorBoard, per step, and the run's sizes as its parameters.

Tracking never stops training: a package that is missing, a server that refuses the run or a call that fails is said
in one line, and training goes on with TensorBoard alone. The tracker's run id is kept beside metrics.jsonl, so that a
resumed train.py logs into the same run (MLflow keeps both values of a step it logs again; W&B ignores steps below
the last it has). Credentials come from this process's environment as each library reads them (MLFLOW_TRACKING_TOKEN,
WANDB_API_KEY): eyas puts them there from a file, never on a command line.

Plain Python, imported by the workloads from their own directory on the host; the library is imported only when named.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

SETTINGS_ENV = "EYAS_TRACKING"  # the settings as JSON, for the CUDA path's handler in torchrun's rank-0 process
RUN_FILE = "tracking_run.json"  # {"mlflow": run id} or {"wandb": run id}, beside metrics.jsonl


@dataclass(frozen=True)
class TrackingSettings:
    mlflow_uri: str | None = None
    experiment: str | None = None
    wandb_project: str | None = None
    run_name: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def named(self) -> bool:
        return bool(self.mlflow_uri or self.wandb_project)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> TrackingSettings:
        text = os.environ.get(SETTINGS_ENV)
        return cls(**json.loads(text)) if text else cls()


# train.py's flags that size the run: the tracked run's parameters, with what staging found (samples, tokens).
SIZE_FLAGS = ("epochs", "max_steps", "lr", "optimizer", "total_seq_len", "ttt_steps", "num_layers", "val_ratio", "seed",
              "nodes")  # fmt: skip


def publish_settings(args: Any, **found: Any) -> None:
    """The tracking flags and the run's sizes, put where either training path's metrics log finds them: this
    process's environment, which torchrun's ranks inherit."""
    params = {name: getattr(args, name) for name in SIZE_FLAGS if getattr(args, name, None) is not None} | found
    settings = TrackingSettings(args.mlflow_uri, args.mlflow_experiment, args.wandb_project, args.run_name, params)
    os.environ[SETTINGS_ENV] = settings.to_env()


def add_tracking_flags(parser: Any) -> None:
    group = parser.add_argument_group("tracking (beside the TensorBoard files; the package must be installed here)")
    group.add_argument("--mlflow-uri", help="log to MLflow at this tracking URI (http://..., databricks, sqlite:...)")
    group.add_argument("--mlflow-experiment", help="the MLflow experiment (default: MLflow's default experiment)")
    group.add_argument("--wandb-project", help="log to this Weights & Biases project")
    group.add_argument("--run-name", help="the tracked run's name (eyas passes its run id)")


class Tracker(Protocol):
    name: str

    def log(self, step: int, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class MlflowTracker:
    name = "MLflow"

    def __init__(self, settings: TrackingSettings, run_id: str | None) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=settings.mlflow_uri)
        if run_id is None:
            experiment = "0"  # MLflow's default experiment
            if settings.experiment:
                found = self.client.get_experiment_by_name(settings.experiment)
                experiment = found.experiment_id if found else self.client.create_experiment(settings.experiment)
            run_id = self.client.create_run(experiment, run_name=settings.run_name).info.run_id
            params = [Param(key, str(value)) for key, value in settings.params.items()]
            self.client.log_batch(run_id, params=params)
        self.run_id = run_id

    def log(self, step: int, values: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(key, value, now, step) for key, value in values.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class WandbTracker:
    name = "W&B"

    def __init__(self, settings: TrackingSettings, run_id: str | None) -> None:
        import wandb

        self.run = wandb.init(
            project=settings.wandb_project, name=settings.run_name, id=run_id, resume="allow", config=settings.params
        )
        self.run_id = self.run.id

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()


def open_tracker(settings: TrackingSettings, directory: Path) -> Tracker | None:
    """The tracker `settings` name, continuing the run recorded in `directory`; None (said in one line) when none is
    named, its package is not installed, or it refuses to start."""
    if not settings.named:
        return None
    kind, package = ("mlflow", "mlflow-skinny") if settings.mlflow_uri else ("wandb", "wandb")
    record = directory / RUN_FILE
    saved = json.loads(record.read_text()).get(kind) if record.exists() else None
    try:
        tracker: Tracker = MlflowTracker(settings, saved) if kind == "mlflow" else WandbTracker(settings, saved)
    except Exception as error:  # not installed, or any refusal: a bad URI, a server down, no credentials
        if isinstance(error, ModuleNotFoundError) and error.name == kind:
            say(
                f"{kind} is not installed in this environment ({sys.executable}); `pip install {package}` there to "
                "track the run in it. Training goes on: the curves are in metrics.jsonl and the TensorBoard files."
            )
        else:
            say(f"{kind} would not start a run ({one_line(error)}); training goes on with TensorBoard alone.")
        return None
    directory.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({kind: tracker.run_id}))
    return tracker


class Tracking:
    """A tracker that logs until a call fails, then says so once and stops: training never stops for it."""

    def __init__(self, tracker: Tracker | None) -> None:
        self.tracker = tracker

    def log(self, step: int, values: dict[str, float]) -> None:
        if self.tracker is None or not values:
            return
        try:
            self.tracker.log(step, values)
        except Exception as error:  # the server gone, a quota, a network error: training matters more
            say(f"{self.tracker.name} logging stopped at step {step} ({one_line(error)}); TensorBoard goes on.")
            self.tracker = None

    def close(self) -> None:
        """The run ended in the tracker (a process killed before leaves it running, as it is)."""
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def say(message: str) -> None:
    print(f"eyas tracking: {message}", flush=True)
