"""The job that turns generated conversations into training data: hidden-state extraction (extract.py).

Pure functions from plain values to JobSpecs (tools/jobs/request.py); launching them is `Jobs.launch`'s.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from pydantic import AfterValidator, Field

from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.request import JobRequest, optional_flags, remote_code_flag, workload_job
from eyas.tools.launch.inherited import InheritedLaunch
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.fields import AbsolutePath
from eyas.tools.settings.sizes import Sizes

# extract.py's knobs that no run size chooses (the same as its own defaults, which it keeps: it imports no eyas).
DISK_RESERVE = "1GiB"  # free space that must remain on the hidden states' disk
HF_BATCH_TOKENS = 4096  # hf backend: padded tokens per forward pass
VLLM_CONCURRENCY = 4  # vllm backend: requests in flight to its server


def _size(value: str) -> str:
    if not value.strip() or value.strip().startswith("-"):
        raise ValueError(f"must be a size such as 1GiB, 500MB or 5%, got {value!r}")
    return value.strip()


class ExtractionRequest(JobRequest):
    """What extract.py is asked to do (its flags; see `extract.py --help` for their meaning)."""

    model_dir: AbsolutePath
    conversations: AbsolutePath
    out_dir: AbsolutePath
    backend: Literal["hf", "vllm"] = "hf"
    layers: list[Annotated[int, Field(ge=0)]] | None = None
    max_tokens: int = Field(gt=0, description="the run's max_seq_len (extraction_sizes): longer conversations are cut")
    max_samples: int | None = Field(None, gt=0)
    reserve: Annotated[str, AfterValidator(_size)] = DISK_RESERVE
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_tokens: int = Field(HF_BATCH_TOKENS, gt=0)
    concurrency: int = Field(VLLM_CONCURRENCY, gt=0)
    launch: InheritedLaunch | None = Field(None, description="vllm backend: production's launch, the server's base")
    ready_timeout_s: float | None = Field(None, gt=0, description="vllm backend: default extract.py's")
    trust_remote_code: bool = False
    shard: tuple[int, int] = Field((0, 1), description="(I, N): the samples whose index is I modulo N")
    offline_samples: int | None = Field(
        None, ge=0, description="hidden states for the first K samples only, token files for the rest (0: online)"
    )


class ExtractionSizes(TypedDict):
    """ExtractionRequest's fields that the run's sizes decide."""

    max_tokens: int


def extraction_sizes(sizes: Sizes) -> ExtractionSizes:
    """The one mapping from a run's sizes to extract.py's flags, for the extract phase and the tests alike."""
    return {"max_tokens": sizes.max_seq_len}


def extract_job(job_id: str, host: HostConfig, workloads_dir: str, request: ExtractionRequest) -> JobSpec:
    flags = [
        "--model", request.model_dir,
        "--input", request.conversations,
        "--out", request.out_dir,
        "--backend", request.backend,
        "--dtype", request.dtype,
        "--max-tokens", str(request.max_tokens),
        "--reserve", request.reserve,
    ]  # fmt: skip
    layers = ",".join(str(layer) for layer in request.layers) if request.layers is not None else None
    flags += optional_flags(
        {"--layers": layers, "--max-samples": request.max_samples, "--offline-samples": request.offline_samples}
    )
    if request.shard != (0, 1):
        flags += ["--shard", f"{request.shard[0]}/{request.shard[1]}"]
    if request.backend == "hf":
        flags += ["--device", request.device, "--batch-tokens", str(request.batch_tokens)]
    else:
        flags += ["--concurrency", str(request.concurrency)]
        flags += optional_flags({"--ready-timeout": request.ready_timeout_s})
        if request.launch is not None:
            flags.append(f"--inherit={request.launch.job_argument()}")
    flags += remote_code_flag(request.trust_remote_code)
    # The vllm backend's server runs in production's environment (NCCL_*, CUDA_*, ...).
    env = request.launch.env if request.launch is not None and request.backend == "vllm" else {}
    return workload_job(job_id, host, workloads_dir, "extract.py", flags, env=env)
