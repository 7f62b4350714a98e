"""The jobs of the training gate before evaluation: the draft vocabulary (vocab.py), then train.py.

Pure functions from plain values to JobSpecs (tools/jobs/request.py). A relaunch of train.py with the same
arguments resumes from its newest checkpoint.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import Field, model_validator

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import JobRequest, optional_flags, remote_code_flag, workload_job
from eyas.tools.launch.inherited import InheritedLaunch
from eyas.tools.settings.config import TRACKER_TOKEN_ENV, HostConfig, TrackingConfig, secret
from eyas.tools.settings.fields import AbsolutePath
from eyas.tools.settings.sizes import Sizes
from eyas.tools.workloads.hidden_states_file import ONLINE_WINDOW

# train.py's knobs that no run size chooses (the same as its own defaults, which it keeps: it imports no eyas).
DRAFTER_LAYERS = 1  # decoder layers of a new drafter: EAGLE-3's one
LEARNING_RATE = 1e-3  # peak learning rate
VAL_RATIO = 0.1  # share of the samples held out of training to report validation loss
CHECKPOINT_EVERY = 0  # optimizer steps between extra checkpoints; 0: one per epoch only
ONLINE_CONCURRENCY = 4  # --online: requests in flight to the extraction server (extract.py's vllm backend's too)


class TrainRequest(JobRequest):
    """What train.py is asked to do (its flags; see `train.py --help` for their meaning)."""

    hidden_states_dir: AbsolutePath
    model_dir: AbsolutePath
    out_dir: AbsolutePath
    work_dir: AbsolutePath | None = None
    d2t: AbsolutePath | None = None
    t2d: AbsolutePath | None = None
    from_pretrained: AbsolutePath | None = None
    num_layers: int = Field(DRAFTER_LAYERS, gt=0)
    target_layer_ids: list[int] | None = None
    epochs: int = Field(gt=0, description="the run's (train_sizes), as are total_seq_len and ttt_steps")
    max_steps: int | None = Field(None, gt=0)
    lr: float = Field(LEARNING_RATE, gt=0)
    optimizer: Literal["auto", "adamw", "muon"] = "auto"
    total_seq_len: int = Field(gt=0)
    ttt_steps: int = Field(gt=0)
    val_ratio: float = Field(VAL_RATIO, ge=0, lt=1)
    checkpoint_every: int = Field(CHECKPOINT_EVERY, ge=0)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    gpus: int | None = Field(None, gt=0)
    threads: int | None = Field(None, gt=0)
    trust_remote_code: bool = False
    nodes: int = Field(1, gt=0, description="train.py processes (one per node) that train together")
    node_rank: int = Field(0, ge=0)
    online: bool = Field(False, description="fetch the token-only samples' hidden states from an extraction server")
    launch: InheritedLaunch | None = Field(None, description="online: production's launch, the server's base")
    concurrency: int = Field(ONLINE_CONCURRENCY, gt=0, description="online: requests in flight to the server")
    window: int = Field(ONLINE_WINDOW, gt=0, description="online: fetched samples' hidden states on disk at once")
    ready_timeout_s: float | None = Field(None, gt=0, description="online: the server's start; default train.py's")
    tracking: TrackingConfig | None = Field(None, description="MLflow or W&B beside TensorBoard (config [tracking])")
    run_name: str | None = Field(None, description="the tracked run's name: the eyas run id")

    @model_validator(mode="after")
    def _vocab_pair(self) -> TrainRequest:
        if (self.d2t is None) != (self.t2d is None):
            raise ValueError("d2t and t2d come together (both written by vocab.py) or not at all")
        if self.node_rank >= self.nodes:
            raise ValueError(f"node_rank {self.node_rank} is not below nodes {self.nodes}")
        if self.online and self.nodes > 1:
            raise ValueError("online training runs on one node, its extraction server beside it")
        return self


class TrainSizes(TypedDict):
    """TrainRequest's fields that the run's sizes decide."""

    epochs: int
    ttt_steps: int
    total_seq_len: int


def train_sizes(sizes: Sizes) -> TrainSizes:
    """The one mapping from a run's sizes to train.py's flags, for the training phase and the tests alike: the
    drafter trains on sequences as long as extraction kept them."""
    return {"epochs": sizes.epochs, "ttt_steps": sizes.ttt_steps, "total_seq_len": sizes.max_seq_len}


def train_job(job_id: str, host: HostConfig, workloads_dir: str, request: TrainRequest) -> JobSpec:
    flags = [
        "--data", request.hidden_states_dir,
        "--verifier", request.model_dir,
        "--out", request.out_dir,
        "--epochs", str(request.epochs),
        "--lr", repr(request.lr),
        "--optimizer", request.optimizer,
        "--total-seq-len", str(request.total_seq_len),
        "--ttt-steps", str(request.ttt_steps),
        "--val-ratio", repr(request.val_ratio),
        "--checkpoint-every", str(request.checkpoint_every),
        "--seed", str(request.seed),
        "--device", request.device,
    ]  # fmt: skip
    flags += optional_flags({
        "--work": request.work_dir,
        "--d2t": request.d2t,
        "--t2d": request.t2d,
        "--from-pretrained": request.from_pretrained,
        "--max-steps": request.max_steps,
        "--gpus": request.gpus,
        "--threads": request.threads,
    })  # fmt: skip
    flags += remote_code_flag(request.trust_remote_code)
    if request.nodes > 1:
        flags += ["--nodes", str(request.nodes), "--node-rank", str(request.node_rank)]
    if request.from_pretrained is None:
        flags += ["--num-layers", str(request.num_layers)]
        if request.target_layer_ids:
            flags += ["--target-layer-ids", *map(str, request.target_layer_ids)]
    if request.online:
        flags += ["--online", "--concurrency", str(request.concurrency), "--window", str(request.window)]
        flags += optional_flags({"--ready-timeout": request.ready_timeout_s})
        if request.launch is not None:
            flags.append(f"--inherit={request.launch.job_argument()}")
    flags += tracking_flags(request.tracking, request.run_name)
    # The online extraction server runs in production's environment (NCCL_*, CUDA_*, ...), as extraction's does.
    env = request.launch.env if request.online and request.launch is not None else {}
    return workload_job(
        job_id, host, workloads_dir, "train.py", flags, env=env, secrets=tracking_secrets(request.tracking)
    )


def tracking_flags(tracking: TrackingConfig | None, run_name: str | None) -> list[str]:
    """train.py's flags for the config's tracker (tools/workloads/tracking.py); none without one."""
    if tracking is None:
        return []
    return optional_flags({
        "--mlflow-uri": tracking.mlflow_uri,
        "--mlflow-experiment": tracking.experiment,
        "--wandb-project": tracking.wandb_project,
        "--run-name": run_name,
    })  # fmt: skip


def tracking_secrets(tracking: TrackingConfig | None) -> dict[str, str]:
    """The tracker's token, when the config names a variable that holds one here: by file, as its library reads it."""
    token = secret(tracking.token_env) if tracking else None
    return {TRACKER_TOKEN_ENV[tracking.kind]: token} if tracking and token else {}


class VocabRequest(JobRequest):
    model_dir: AbsolutePath
    hidden_states_dir: AbsolutePath
    out_dir: AbsolutePath
    draft_vocab_size: int = Field(gt=0)
    # The run's prompt source: ranks the slots a small run's answers leave empty (vocab.py --fill-from).
    fill_from: str | None = None
    trust_remote_code: bool = False


def vocab_job(job_id: str, host: HostConfig, workloads_dir: str, request: VocabRequest) -> JobSpec:
    flags = [
        "--hidden-states", request.hidden_states_dir,
        "--model", request.model_dir,
        "--draft-vocab-size", str(request.draft_vocab_size),
        "--out", request.out_dir,
    ]  # fmt: skip
    flags += optional_flags({"--fill-from": request.fill_from})
    flags += remote_code_flag(request.trust_remote_code)
    return workload_job(job_id, host, workloads_dir, "vocab.py", flags)
