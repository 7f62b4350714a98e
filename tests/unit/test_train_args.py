"""train.py's argument handling and the command line of its CUDA path (speculators' trainer under torchrun).

No GPU exists here, so the CUDA path is checked by the argv it builds (and, in test_train_target.py, by
speculators' own argument resolver and a dry run of its trainer on CPU); these tests need no torch.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.workloads.progress import last_progress
from tensorboard_scalars import read_scalars

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import train
import train_cuda


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    data, model = tmp_path / "hs", tmp_path / "model"
    data.mkdir()
    model.mkdir()
    (model / "config.json").write_text("{}")
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    for name in ("d2t-64.npy", "t2d-64.npy"):
        (vocab / name).write_bytes(b"")
    return {"data": data, "model": model, "d2t": vocab / "d2t-64.npy", "t2d": vocab / "t2d-64.npy", "root": tmp_path}


def args_for(inputs: dict[str, Path], *extra: str) -> list[str]:
    return [
        "--data",
        str(inputs["data"]),
        "--verifier",
        str(inputs["model"]),
        "--out",
        str(inputs["root"] / "out"),
        *extra,
    ]


def test_defaults_put_the_work_directory_beside_the_output(inputs: dict[str, Path]) -> None:
    args = train.parse_args(args_for(inputs))
    train.check_args(args)
    assert args.work == inputs["root"] / "out.work"
    assert (args.optimizer, args.num_layers, args.ttt_steps, args.device) == ("auto", 1, 3, "auto")


@pytest.mark.parametrize(
    ("requested", "device", "resolved"),
    [
        ("auto", "cuda", "muon"),
        ("auto", "cpu", train.CPU_AUTO_OPTIMIZER),
        ("adamw", "cuda", "adamw"),
        ("muon", "cpu", "muon"),
    ],
)
def test_auto_optimizer_is_muon_on_cuda_and_the_measured_choice_on_cpu(
    requested: str, device: str, resolved: str
) -> None:
    assert train.resolve_optimizer(requested, device) == resolved


@pytest.mark.parametrize(
    ("requested", "device", "resolved"),
    [("auto", "cuda", "speculators"), ("auto", "cpu", "eyas"), ("speculators", "cpu", "speculators")],
)
def test_auto_trainer_is_speculators_on_cuda_and_eyas_loop_on_cpu(requested: str, device: str, resolved: str) -> None:
    assert train.resolve_trainer(requested, device) == resolved


def test_eyas_loop_is_refused_on_cuda() -> None:
    with pytest.raises(SystemExit, match="--trainer eyas runs on a CPU only"):
        train.resolve_trainer("eyas", "cuda")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--d2t", "D2T"], "--d2t and --t2d come together"),
        (["--d2t", "D2T", "--t2d", "/nowhere/t2d.npy"], "--t2d /nowhere/t2d.npy does not exist"),
        (["--from-pretrained", "/nowhere"], "lacks config.json or model.safetensors"),
        (["--val-ratio", "1"], "must be in [0, 1)"),
        (["--epochs", "0"], "must be positive"),
        (["--threads", "0"], "must be positive"),
        (["--max-steps", "0"], "must be positive"),
    ],
)
def test_bad_arguments_are_refused_with_the_fix(inputs: dict[str, Path], extra: list[str], message: str) -> None:
    extra = [str(inputs["d2t"]) if item == "D2T" else item for item in extra]
    with pytest.raises(SystemExit, match=message.replace("[", r"\[").replace(")", r"\)")):
        train.check_args(train.parse_args(args_for(inputs, *extra)))


def test_missing_inputs_name_both_problems(tmp_path: Path) -> None:
    args = train.parse_args(
        ["--data", str(tmp_path / "none"), "--verifier", str(tmp_path), "--out", str(tmp_path / "o")]
    )
    with pytest.raises(SystemExit) as raised:
        train.check_args(args)
    assert "extract.py's output directory" in str(raised.value) and "no config.json" in str(raised.value)


def speculators_flags(argv: list[str]) -> dict[str, list[str]]:
    """The flags after the script path of `python -m torch.distributed.run ... train_cuda.py --flag value ...`."""
    flags: dict[str, list[str]] = {}
    current = None
    for item in argv[argv.index(str(WORKLOADS_DIR / "train_cuda.py")) + 1 :]:
        if item.startswith("--"):
            current = item
            flags[current] = []
        else:
            flags[current].append(item)  # type: ignore[index]
    return flags


def build(
    inputs: dict[str, Path],
    *extra: str,
    init: Path | None = None,
    freq: float = 1.0,
    endpoint: str | None = None,
    device: str = "cuda",
) -> list[str]:
    args = train.parse_args(args_for(inputs, *extra))
    args.optimizer = train.resolve_optimizer(args.optimizer, "cuda")  # as main() does before launching
    staged = inputs["root"] / "staged"
    span = train_cuda.Span(epochs=args.epochs, max_steps=args.max_steps, total=40)
    return train_cuda.speculators_argv(
        args, python="/venv/bin/python", nproc=8, dataset=staged / "dataset", hidden_states=staged / "hidden_states",
        save_path=inputs["root"] / "ckpt", init_drafter=init, checkpoint_freq=freq, span=span, device=device,
        endpoint=endpoint,
    )  # fmt: skip


def test_cuda_command_runs_speculators_trainer_under_torchrun_with_the_cpu_loops_drafter(
    inputs: dict[str, Path],
) -> None:
    argv = build(inputs, "--d2t", str(inputs["d2t"]), "--t2d", str(inputs["t2d"]), "--num-layers", "2",
                 "--target-layer-ids", "2", "15", "27", "--epochs", "5", "--lr", "3e-4", "--val-ratio", "0.05",
                 "--max-steps", "40", freq=0.25)  # fmt: skip
    assert argv[:5] == ["/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=8"]
    flags = speculators_flags(argv)
    root = inputs["root"]
    assert flags == {
        "--speculator-type": ["eagle3"],
        "--verifier-name-or-path": [str(inputs["model"])],
        "--data-path": [str(root / "staged" / "dataset")],
        "--hidden-states-path": [str(root / "staged" / "hidden_states")],
        "--on-missing": ["raise"],
        "--save-path": [str(root / "ckpt")],
        "--epochs": ["5"],
        "--lr": ["0.0003"],
        "--optimizer": ["muon"],
        "--total-seq-len": ["2048"],
        "--ttt-steps": ["3"],
        "--train-data-ratio": ["0.95"],
        "--checkpoint-freq": ["0.25"],
        "--num-workers": ["4"],
        "--seed": ["0"],
        "--log-freq": ["1"],
        "--num-layers": ["2"],
        # The CPU loop's drafter has full attention in every layer; speculators' default is a sliding window.
        "--full-attention-indices": ["0", "1"],
        "--target-layer-ids": ["2", "15", "27"],
        "--d2t-path": [str(inputs["d2t"])],
        "--t2d-path": [str(inputs["t2d"])],
        "--scheduler-total-steps": ["40"],
        "--max-steps": ["40"],
        # drafter_recipe.py's warm-up (5% of 40 steps is 2; its floor, at most a quarter of the run, gives 10) and
        # per-layer norms of the captured layers, as the CPU loop builds them.
        "--scheduler-warmup-steps": ["10"],
        "--fc-norm": [],
        "--no-norm-before-fc": [],
    }


@pytest.mark.parametrize(
    "extra",
    [
        ["--val-ratio", "0.05", "--max-steps", "7", "--num-workers", "2"],
        ["--dry-run", "--optimizer", "muon", "--num-layers", "3", "--d2t", "D2T", "--t2d", "T2D"],
    ],
)
def test_the_cpu_command_is_the_cuda_command_but_for_the_cpu_flags(inputs: dict[str, Path], extra: list[str]) -> None:
    """One builder for both devices: a flag added to the CUDA path reaches the CPU's Trainer too (or this fails)."""
    extra = [str(inputs["d2t"]) if item == "D2T" else str(inputs["t2d"]) if item == "T2D" else item for item in extra]
    cuda, cpu = (build(inputs, *extra, device=device) for device in ("cuda", "cpu"))
    cpu_flags = dict(zip(train_cuda.CPU_FLAGS[::2], train_cuda.CPU_FLAGS[1::2], strict=True))

    def without_cpu_flags(argv: list[str]) -> list[str]:
        kept, skip = [], False
        for item in argv:
            if not skip and item not in cpu_flags:
                kept.append(item)
            skip = not skip and item in cpu_flags  # a CPU flag's value follows it
        return kept

    assert without_cpu_flags(cpu) == without_cpu_flags(cuda)
    assert {flag: values for flag, values in speculators_flags(cpu).items() if flag in cpu_flags} == {
        flag: [value] for flag, value in cpu_flags.items()
    }
    assert speculators_flags(cuda)["--num-workers"] == [str(train.parse_args(args_for(inputs, *extra)).num_workers)]


@pytest.mark.parametrize(
    ("per_epoch", "max_steps", "span"),
    [
        ([6, 6, 6], None, train_cuda.Span(epochs=3, max_steps=None, total=18)),
        ([6, 6, 6], 8, train_cuda.Span(epochs=2, max_steps=8, total=8)),  # not 8 + 3 - 1 steps: the third is cut
        ([6, 6, 6], 6, train_cuda.Span(epochs=1, max_steps=6, total=6)),  # the bound at an epoch's end
        ([6, 5, 6], 12, train_cuda.Span(epochs=3, max_steps=12, total=12)),
        ([6, 6, 6], 30, train_cuda.Span(epochs=3, max_steps=None, total=18)),  # the epochs end first
    ],
)
def test_the_span_stops_the_epochs_where_max_steps_is_reached(
    per_epoch: list[int], max_steps: int | None, span: train_cuda.Span
) -> None:
    assert train_cuda.span_of(per_epoch, max_steps) == span


def test_online_the_trainer_asks_the_extraction_server_for_what_is_missing_on_disk(inputs: dict[str, Path]) -> None:
    offline = speculators_flags(build(inputs, "--val-ratio", "0.05"))
    online = speculators_flags(build(inputs, "--val-ratio", "0.05", endpoint="http://127.0.0.1:41234/v1"))
    assert online["--on-missing"] == ["generate"] and online["--vllm-endpoint"] == ["http://127.0.0.1:41234/v1"]
    # Everything else as offline: the same staged dataset and kept files, the same drafter and schedule.
    assert {k: v for k, v in online.items() if k not in ("--on-missing", "--vllm-endpoint")} == {
        k: v for k, v in offline.items() if k != "--on-missing"
    }
    assert "--vllm-endpoint" not in offline


@pytest.mark.parametrize(
    ("window", "gpus", "requested", "max_steps", "workers"),
    [
        (8, 8, 4, None, 1),  # one worker per GPU: 8 samples fetched at once, the window
        (8, 2, 4, None, 4),  # room for the 4 asked for
        (8, 1, 4, None, 4),  # never more than asked for
        (8, 4, 4, 40, 1),  # --max-steps: a GPU's training and validation workers may both be fetching
        (8, 8, 4, 40, 0),  # the rank fetches itself, one sample at a time, in either loader
        (8, 8, 0, None, 0),
    ],
)
def test_online_workers_keep_speculators_fetches_within_the_window(
    window: int, gpus: int, requested: int, max_steps: int | None, workers: int
) -> None:
    assert train_cuda.online_workers(window, gpus, requested, max_steps) == workers
    loaders = 2 if max_steps and workers else 1
    assert gpus * max(workers * loaders, 1) <= window


def test_online_refuses_more_gpus_than_the_window_holds() -> None:
    with pytest.raises(ValueError, match=r"--window 8 is fewer than the 16 GPUs.*pass --window 16"):
        train_cuda.online_workers(8, 16, 4, None)


def test_finetuning_leaves_the_drafter_shape_to_the_checkpoint(inputs: dict[str, Path]) -> None:
    # speculators refuses decoder-shaping flags next to --from-pretrained: the checkpoint defines the drafter.
    flags = speculators_flags(build(inputs, "--dry-run", init=inputs["root"] / "init"))
    assert flags["--from-pretrained"] == [str(inputs["root"] / "init")]
    assert flags["--dry-run"] == []
    assert not {"--num-layers", "--full-attention-indices", "--target-layer-ids", "--d2t-path"} & flags.keys()
    assert not {"--fc-norm", "--no-norm-before-fc"} & flags.keys()  # a finetuned drafter keeps its own norms


def test_latest_checkpoint_is_the_highest_numbered_directory(tmp_path: Path) -> None:
    assert train_cuda.latest_checkpoint(tmp_path) is None
    for name in ("2", "10", "interrupted", "checkpoint_best"):
        (tmp_path / name).mkdir()
    (tmp_path / "epoch10_end").symlink_to(tmp_path / "10")
    (tmp_path / "11").write_text("a file, not a checkpoint")
    assert train_cuda.latest_checkpoint(tmp_path) == tmp_path / "10"


def test_trainer_metric_records_become_progress_lines_and_metrics_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    handler = train_cuda.ProgressHandler(total=40, metrics_file=str(tmp_path / "metrics.jsonl"))
    logger = logging.getLogger("test.speculators.metrics")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # The shapes speculators' Trainer logs: per step after normalize_counted_metrics, and per validation epoch.
    train_record = {"train": {"loss": 2.5, "full_acc_0": 0.7, "full_acc_2": 0.2, "full_acc_1": 0.4, "cond_acc_0": 0.7},
                    "profile": None, "epoch": 1, "lr": 1e-3, "global_step": 11}  # fmt: skip
    logger.info(train_record)
    line = last_progress(capsys.readouterr().out)
    assert line is not None
    assert {key: line[key] for key in ("phase", "done", "total", "epoch", "loss", "acc")} == {
        "phase": "train", "done": 12, "total": 40, "epoch": 1, "loss": 2.5, "acc": [0.7, 0.4, 0.2],
    }  # fmt: skip
    logger.info({"val": {"loss_epoch": 3.0, "full_acc_0_epoch": 0.6, "full_acc_1_epoch": 0.3}, "epoch": 1})
    line = last_progress(capsys.readouterr().out)
    assert line is not None and (line["phase"], line["loss"], line["acc"]) == ("val", 3.0, [0.6, 0.3])
    logger.info("a plain message is not a metric record")
    assert last_progress(capsys.readouterr().out) is None
    logger.removeHandler(handler)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [{key: row.get(key) for key in ("split", "step", "loss", "acc", "lr")} for row in rows] == [
        {"split": "train", "step": 12, "loss": 2.5, "acc": [0.7, 0.4, 0.2], "lr": 1e-3},
        {"split": "val", "step": 12, "loss": 3.0, "acc": [0.6, 0.3], "lr": None},  # after the last step seen
    ]
    # The same scalars in TensorBoard's files (speculators' own TensorBoard logger needs a package the host lacks).
    scalars = read_scalars(tmp_path / "tensorboard")
    assert scalars["train/loss"] == [(12, 2.5)] and scalars["val/loss"] == [(12, 3.0)]
    assert [scalars[f"train/acc_{position}"][0][1] for position in range(3)] == pytest.approx([0.7, 0.4, 0.2])
    assert scalars["train/lr"][0][1] == pytest.approx(1e-3) and "val/lr" not in scalars


def test_a_downloaded_drafter_is_pointed_at_the_local_verifier(tmp_path: Path) -> None:
    source = tmp_path / "downloaded"
    source.mkdir()
    config = {"speculators_model_type": "eagle3", "speculators_config": {"verifier": {"name_or_path": "org/Model"}}}
    (source / "config.json").write_text(json.dumps(config))
    (source / "model.safetensors").write_bytes(b"weights")
    staged = train.stage_init_drafter(source, tmp_path / "model", tmp_path / "init")
    staged_config = json.loads((staged / "config.json").read_text())
    assert staged_config["speculators_config"]["verifier"]["name_or_path"] == str((tmp_path / "model").resolve())
    assert (staged / "model.safetensors").read_bytes() == b"weights"
    assert json.loads((source / "config.json").read_text()) == config  # the download itself is untouched
    (source / "config.json").write_text(json.dumps({"speculators_model_type": "dflash"}))
    with pytest.raises(SystemExit, match="neither a speculators eagle3 drafter"):
        train.stage_init_drafter(source, tmp_path / "model", tmp_path / "init")
