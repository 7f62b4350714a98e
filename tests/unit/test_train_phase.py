"""The train and evaluate JobSpecs: absolute interpreter, uploaded scripts, flags as the workloads parse them,
and every argument quoted by the job wrapper."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_job
from eyas.graph.phases.train.jobs import TrainRequest, train_job, train_sizes
from eyas.tools.checks.server_flags import EXTRACT_OWN
from eyas.tools.jobs.detached import wrapper_script
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES

sys.path.insert(0, str(WORKLOADS_DIR))

import evaluate
import train

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
HOST = HostConfig(address="gpu-box", python="/opt/ml venv/bin/python", workdir="/data/eyas")
WORKLOADS = "/data/eyas/workloads"
SIZED = train_sizes(DEFAULT_SIZES)  # what a run at the default sizes asks


def test_train_job_is_what_train_py_parses() -> None:
    request = TrainRequest(
        hidden_states_dir="/data/run 1/hs", model_dir="/models/target", out_dir="/data/run 1/drafter",
        d2t="/data/run 1/vocab/d2t-8192.npy", t2d="/data/run 1/vocab/t2d-8192.npy", lr=5e-4,
        checkpoint_every=50, target_layer_ids=[2, 15, 27], device="cpu", **(SIZED | {"epochs": 4}),
    )  # fmt: skip
    spec = train_job("run1-train", HOST, WORKLOADS, request)
    assert spec.argv[:2] == ["/opt/ml venv/bin/python", "/data/eyas/workloads/train.py"]
    assert spec.env["PYTHONUNBUFFERED"] == "1"
    args = train.parse_args(spec.argv[2:])
    assert (str(args.data), str(args.out), str(args.work)) == (
        "/data/run 1/hs",
        "/data/run 1/drafter",
        "/data/run 1/drafter.work",
    )
    assert (str(args.d2t), args.epochs, args.lr, args.checkpoint_every) == (request.d2t, 4, 5e-4, 50)
    assert (args.target_layer_ids, args.device, args.optimizer, args.from_pretrained) == (
        [2, 15, 27],
        "cpu",
        "auto",
        None,
    )


def test_a_training_node_is_the_same_job_but_its_rank_and_meets_the_others_in_the_work_directory() -> None:
    request = TrainRequest(hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/drafter", nodes=3, **SIZED)
    ranks = [
        train.parse_args(
            train_job(f"r.train-{i}", HOST, WORKLOADS, request.model_copy(update={"node_rank": i})).argv[2:]
        )
        for i in range(3)
    ]
    assert [(args.nodes, args.node_rank) for args in ranks] == [(3, 0), (3, 1), (3, 2)]
    assert {str(args.rendezvous) for args in ranks} == {"/d/drafter.work/rendezvous"}  # storage they all share
    single = TrainRequest(hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/drafter", **SIZED)
    alone = train.parse_args(train_job("r.train", HOST, WORKLOADS, single).argv[2:])
    assert (alone.nodes, alone.node_rank) == (1, 0)
    assert {k: v for k, v in vars(ranks[2]).items() if k != "node_rank"} == {
        k: v for k, v in vars(ranks[0]).items() if k != "node_rank"
    }


def test_finetune_job_names_no_drafter_shape() -> None:
    request = TrainRequest(
        hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/out", from_pretrained="/d/downloaded", num_layers=2,
        **SIZED,
    )  # fmt: skip
    argv = train_job("ft", HOST, WORKLOADS, request).argv
    assert "--num-layers" not in argv and train.parse_args(argv[2:]).from_pretrained.as_posix() == "/d/downloaded"


def test_an_online_train_job_is_what_train_py_parses_and_runs_in_production_s_environment() -> None:
    """The plan's online or hybrid mode: train.py fetches the token-only samples' hidden states from an extraction
    server it starts from production's launch (the Kimi unit: tensor-parallel 8, its NCCL environment)."""
    launch = inherit_launch(parse_unit_file((FIXTURES / "vllm_kimi.service").read_text()), EXTRACT_OWN)
    request = TrainRequest(
        hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/drafter", online=True, launch=launch, window=6,
        concurrency=3, ready_timeout_s=2580.0, **SIZED,
    )  # fmt: skip
    spec = train_job("r.train", HOST, WORKLOADS, request)
    args = train.parse_args(spec.argv[2:])
    assert (args.online, args.window, args.concurrency, args.ready_timeout) == (True, 6, 3, 2580.0)
    assert args.inherit == [list(pair) for pair in launch.flags] and ["--tensor-parallel-size", "8"] in args.inherit
    assert spec.env["NCCL_P2P_LEVEL"] == "SYS" and spec.env == {**spec.env, **launch.env}
    # Offline, none of it: the same job as before the mode existed.
    offline = train_job("r.train", HOST, WORKLOADS, request.model_copy(update={"online": False}))
    assert "--online" not in offline.argv and not [word for word in offline.argv if word.startswith("--inherit")]
    assert "NCCL_P2P_LEVEL" not in offline.env
    assert train.parse_args(offline.argv[2:]).online is False


def test_evaluate_job_is_what_evaluate_py_parses() -> None:
    request = EvaluateRequest(
        model_dir="/models/target", drafter_dir="/data/run 1/drafter", prompts="/data/run 1/held out.jsonl",
        out="/runs/r1/evaluation.json", k=[1, 3, 5], vllm_args=["--enforce-eager"],
        max_tokens=DEFAULT_SIZES.eval_max_tokens, port=8850,
    )  # fmt: skip
    spec = evaluate_job("run1-evaluate", HOST, WORKLOADS, request)
    assert spec.argv[:2] == ["/opt/ml venv/bin/python", "/data/eyas/workloads/evaluate.py"]
    args = evaluate.build_parser().parse_args(spec.argv[2:])  # without the checks of files on this machine
    assert (str(args.drafter), str(args.prompts), str(args.out)) == (
        "/data/run 1/drafter",
        "/data/run 1/held out.jsonl",
        "/runs/r1/evaluation.json",
    )
    assert (args.k, args.port, args.max_tokens, args.acceptance_only) == ([1, 3, 5], 8850, 128, False)
    assert shlex.split(args.vllm_args) == ["--enforce-eager"]


def test_the_wrapper_quotes_paths_with_spaces() -> None:
    request = TrainRequest(hidden_states_dir="/d/my hs", model_dir="/m", out_dir="/d/o; rm -rf /", **SIZED)
    spec = train_job("t", HOST, WORKLOADS, request)
    command_line = wrapper_script(spec, "/data/eyas/jobs/t").splitlines()[-2]
    assert shlex.split(command_line) == spec.argv


@pytest.mark.parametrize(
    "bad",
    [
        {"hidden_states_dir": "relative/hs"},
        {"d2t": "/v/d2t.npy"},
        {"val_ratio": 1.0},
        {"epochs": 0},
        {"nodes": 2, "node_rank": 2},
        {"online": True, "nodes": 2},  # train.py --online runs on one node, its extraction server beside it
        {"online": True, "window": 0},
    ],
)
def test_requests_refuse_what_train_py_would(bad: dict[str, object]) -> None:
    fields = {"hidden_states_dir": "/d/hs", "model_dir": "/m", "out_dir": "/d/o", **SIZED, **bad}
    with pytest.raises(ValidationError):
        TrainRequest(**fields)  # type: ignore[arg-type]


def test_relative_workloads_directory_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        train_job(
            "t", HOST, "workloads", TrainRequest(hidden_states_dir="/d/hs", model_dir="/m", out_dir="/d/o", **SIZED)
        )
