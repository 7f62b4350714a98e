"""The jobs that turn generated conversations into training data: hidden-state extraction, then the vocabulary.

Pure functions from plain values to JobSpecs; launching them is `Jobs.launch`'s business. The program is
the ML environment's absolute interpreter (a non-interactive shell's PATH may not find a venv), the
scripts are those `upload_workloads` put on the host, and every path is absolute on the host. The job
wrapper quotes each argument.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from eyas.tools.config import AbsolutePath, HostConfig
from eyas.tools.jobs import JobSpec

# Workloads print progress lines as they go; unbuffered output keeps the job log current. The model is a
# local directory, so the Hugging Face hub is never asked.
JOB_ENV = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}


def _size(value: str) -> str:
    if not value.strip() or value.strip().startswith("-"):
        raise ValueError(f"must be a size such as 1GiB, 500MB or 5%, got {value!r}")
    return value.strip()


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExtractionRequest(_Request):
    """What extract.py is asked to do (its flags; see `extract.py --help` for their meaning)."""

    model_dir: AbsolutePath
    conversations: AbsolutePath
    out_dir: AbsolutePath
    backend: Literal["hf", "vllm"] = "hf"
    layers: list[Annotated[int, Field(ge=0)]] | None = None
    max_tokens: int = Field(4096, gt=0)
    max_samples: int | None = Field(None, gt=0)
    reserve: Annotated[str, AfterValidator(_size)] = "1GiB"
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_tokens: int = Field(4096, gt=0)
    concurrency: int = Field(4, gt=0)


class VocabRequest(_Request):
    model_dir: AbsolutePath
    hidden_states_dir: AbsolutePath
    out_dir: AbsolutePath
    draft_vocab_size: int = Field(gt=0)


def _script(workloads_dir: str, name: str) -> str:
    if not posixpath.isabs(workloads_dir):
        raise ValueError(f"the workloads directory must be absolute on the host, got {workloads_dir!r}")
    return posixpath.join(workloads_dir, name)


def extract_job(job_id: str, host: HostConfig, workloads_dir: str, request: ExtractionRequest) -> JobSpec:
    argv = [
        host.python, _script(workloads_dir, "extract.py"),
        "--model", request.model_dir,
        "--input", request.conversations,
        "--out", request.out_dir,
        "--backend", request.backend,
        "--dtype", request.dtype,
        "--max-tokens", str(request.max_tokens),
        "--reserve", request.reserve,
    ]  # fmt: skip
    if request.layers is not None:
        argv += ["--layers", ",".join(str(layer) for layer in request.layers)]
    if request.max_samples is not None:
        argv += ["--max-samples", str(request.max_samples)]
    if request.backend == "hf":
        argv += ["--device", request.device, "--batch-tokens", str(request.batch_tokens)]
    else:
        argv += ["--concurrency", str(request.concurrency)]
    return JobSpec(job_id=job_id, argv=argv, env=dict(JOB_ENV))


def vocab_job(job_id: str, host: HostConfig, workloads_dir: str, request: VocabRequest) -> JobSpec:
    argv = [
        host.python, _script(workloads_dir, "vocab.py"),
        "--hidden-states", request.hidden_states_dir,
        "--model", request.model_dir,
        "--draft-vocab-size", str(request.draft_vocab_size),
        "--out", request.out_dir,
    ]  # fmt: skip
    return JobSpec(job_id=job_id, argv=argv, env=dict(JOB_ENV))
