"""The extraction and vocabulary jobs: the argv they build, and one launched for real through the job wrapper."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from extraction import prepared_target, write_sample_file
from eyas.graph.phases.extract.jobs import ExtractionRequest, extract_job, extraction_sizes
from eyas.graph.phases.train.jobs import VocabRequest, vocab_job
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobStatus, wrapper_script
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from waiting import wait_for

HOST = HostConfig(address="gpu-box", python="/opt/ml venv/bin/python", workdir="/data/eyas")
WORKLOADS = "/data/eyas/workloads"
SIZED = extraction_sizes(DEFAULT_SIZES)  # what a run at the default sizes asks


def test_extract_job_runs_the_script_with_the_venv_interpreter_and_every_flag() -> None:
    request = ExtractionRequest(
        model_dir="/models/Kimi K2", conversations="/data/gen.jsonl", out_dir="/data/hs", max_samples=25_000, **SIZED
    )
    spec = extract_job("run1-extract", HOST, WORKLOADS, request)
    assert spec.job_id == "run1-extract" and spec.env == {"PYTHONUNBUFFERED": "1"}  # online: hub_offline is off
    assert spec.argv == [
        "/opt/ml venv/bin/python", "/data/eyas/workloads/extract.py",
        "--model", "/models/Kimi K2", "--input", "/data/gen.jsonl", "--out", "/data/hs",
        "--backend", "hf", "--dtype", "bfloat16", "--max-tokens", "4096", "--reserve", "1GiB",
        "--max-samples", "25000", "--device", "auto", "--batch-tokens", "4096",
    ]  # fmt: skip


def test_vllm_extraction_passes_its_own_flags_and_custom_layers() -> None:
    request = ExtractionRequest(
        model_dir="/m", conversations="/c.jsonl", out_dir="/hs", backend="vllm", layers=[1, 23, 44, 61],
        concurrency=32, reserve="5%", **SIZED,
    )  # fmt: skip
    argv = extract_job("x", HOST, WORKLOADS, request).argv
    assert argv[argv.index("--layers") + 1] == "1,23,44,61"
    assert argv[argv.index("--concurrency") + 1] == "32" and argv[argv.index("--reserve") + 1] == "5%"
    assert "--device" not in argv and "--batch-tokens" not in argv


def test_vocab_job_argv() -> None:
    request = VocabRequest(model_dir="/m", hidden_states_dir="/hs", out_dir="/vocab", draft_vocab_size=32000)
    assert vocab_job("run1-vocab", HOST, WORKLOADS, request).argv == [
        "/opt/ml venv/bin/python", "/data/eyas/workloads/vocab.py",
        "--hidden-states", "/hs", "--model", "/m", "--draft-vocab-size", "32000", "--out", "/vocab",
    ]  # fmt: skip


def test_every_argument_is_quoted_in_the_job_script() -> None:
    request = ExtractionRequest(model_dir="/models/a b; rm -rf ~", conversations="/c.jsonl", out_dir="/hs", **SIZED)
    script = wrapper_script(extract_job("x", HOST, WORKLOADS, request), "/data/eyas/jobs/x")
    assert shlex.quote("/models/a b; rm -rf ~") in script and shlex.quote("/opt/ml venv/bin/python") in script


@pytest.mark.parametrize(
    "bad",
    [{"model_dir": "models/relative"}, {"max_tokens": 0}, {"reserve": "-1GiB"}, {"layers": [-1]}, {"backend": "x"}],
)
def test_impossible_requests_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        ExtractionRequest(**{"model_dir": "/m", "conversations": "/c.jsonl", "out_dir": "/hs", **SIZED, **bad})


def test_a_relative_workloads_directory_is_refused() -> None:
    request = VocabRequest(model_dir="/m", hidden_states_dir="/hs", out_dir="/v", draft_vocab_size=8)
    with pytest.raises(ValueError, match="absolute"):
        vocab_job("x", HOST, "workloads", request)


@pytest.mark.slow
def test_the_vocab_job_runs_detached_from_an_awkward_directory(tmp_path: Path) -> None:
    """Uploaded workloads, the venv's absolute interpreter, a path with a space: the real job wrapper runs it."""
    target = prepared_target()
    workdir = tmp_path / "eyas work"
    hidden_states = workdir / "hidden states"
    hidden_states.mkdir(parents=True)
    write_sample_file(hidden_states / "hs_0.safetensors", [4, 4, 7, 1], [False, True, True, True])
    host = LocalHost()
    config = HostConfig(address="local", python=str(target.python), workdir=str(workdir))
    request = VocabRequest(
        model_dir=str(target.model_dir), hidden_states_dir=str(hidden_states), out_dir=str(workdir / "vocab"),
        draft_vocab_size=2,
    )  # fmt: skip
    jobs = Jobs(host, str(workdir))
    jobs.launch(vocab_job("vocab", config, upload_workloads(host, str(workdir)), request))
    state = wait_for(lambda: (s := jobs.status("vocab")).finished and s, 120, what="the vocab job to end")
    assert state.status is JobStatus.SUCCEEDED, jobs.tail("vocab")
    summary = json.loads((workdir / "vocab" / "vocab_summary.json").read_text())
    assert (
        summary["loss_tokens"] == 3 and summary["target_vocab_size"] == 49152 and summary["coverage"] == round(2 / 3, 6)
    )
