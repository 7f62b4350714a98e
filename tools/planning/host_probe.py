"""Extraction and training speed measured on the host itself (the speed_probe.py workload), cached there.

The probe loads the target and steps a drafter, so it runs only where that is cheap and harmless: a host
without GPUs, where the target is small enough to serve on CPU. On a GPU host the GPUs are production's and
the target may be 540 GB, so the planner keeps its assumed FLOP/s there and says so. A result is kept on the
host for a week under its inputs (model, shapes, the workload scripts' digest), so a second plan is instant;
the plan's sources say when it was measured.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
import time
from pathlib import PurePosixPath

from pydantic import BaseModel, Field, ValidationError

from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.settings.config import HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES

PROBE_TIMEOUT_S = 600
CACHE_DAYS = 7


class SpeedRequest(BaseModel):
    """The shapes the run will extract and train at; the probe's cache key."""

    model_dir: str
    sample_tokens: int = Field(gt=0)
    total_seq_len: int = Field(gt=0)
    draft_vocab_size: int = Field(gt=0)
    ttt_steps: int = Field(DEFAULT_SIZES.ttt_steps, gt=0)
    trust_remote_code: bool = False


class Speeds(BaseModel):
    """What speed_probe.py prints, and when it was measured."""

    device: str
    extraction_tok_s: float = Field(gt=0)
    training_tok_s: float = Field(gt=0)
    optimizer: str
    probe_seconds: float
    measured_at: float = 0.0

    def source(self, what: str, request: SpeedRequest) -> str:
        rate = self.extraction_tok_s if what == "extraction" else self.training_tok_s
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at))
        shape = f"samples of {request.sample_tokens} tokens"
        if what == "training":
            shape += f" packed into {request.total_seq_len}, {self.optimizer}"
        return f"probe on the host's {self.device}: {rate:,.0f} tokens/s ({shape}; measured {when})"


def sample_bucket(tokens: float, max_seq_len: int) -> int:
    """Tokens per probe sample: the run's average rounded up to a power of two (at least 64) and capped at its
    longest, so that plans of nearby sizes share one cached measurement. Per-token cost barely changes within
    a factor of two at these lengths."""
    return min(max_seq_len, max(64, 1 << math.ceil(math.log2(max(1.0, tokens)))))


def _cache_path(host: Host, request: SpeedRequest, workloads: str) -> str:
    digest = host.run(f"cat {shlex.quote(workloads)}/*.py | sha256sum", timeout=30).stdout.split()[:1]
    key = hashlib.sha256(json.dumps([request.model_dump(), digest], sort_keys=True).encode()).hexdigest()[:24]
    home = host.run('printf %s "${XDG_CACHE_HOME:-$HOME/.cache}"', timeout=15).stdout.strip() or "/tmp"
    return str(PurePosixPath(home) / "eyas" / "probes" / f"speed-{key}.json")


def _cached(host: Host, path: str, now: float) -> Speeds | None:
    read = host.run(f"cat {shlex.quote(path)} 2>/dev/null", timeout=15)
    if not read.ok:
        return None
    try:
        speeds = Speeds.model_validate_json(read.stdout)
    except ValidationError:
        return None
    return speeds if now - speeds.measured_at < CACHE_DAYS * 86400 else None


def probe_speeds(host: Host, host_config: HostConfig, request: SpeedRequest, clock: Clock) -> Speeds | str:
    """The host's speeds, cached or measured now; a one-line reason when they cannot be measured."""
    workloads = upload_workloads(host, host_config.workdir)
    path = _cache_path(host, request, workloads)
    cached = _cached(host, path, clock.now())
    if cached is not None:
        return cached
    argv = [
        host_config.python, f"{workloads}/speed_probe.py", "--model", request.model_dir,
        "--sample-tokens", str(request.sample_tokens), "--total-seq-len", str(request.total_seq_len),
        "--draft-vocab-size", str(request.draft_vocab_size), "--ttt-steps", str(request.ttt_steps), "--device", "cpu",
    ]  # fmt: skip
    if request.trust_remote_code:
        argv.append("--trust-remote-code")
    result = host.run(shlex.join(argv), timeout=PROBE_TIMEOUT_S)
    lines = result.stdout.strip().splitlines()
    if not result.ok or not lines:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"speed probe failed (exit {result.rc}): {tail[0][:200]}"
    try:
        speeds = Speeds.model_validate({**json.loads(lines[-1]), "measured_at": clock.now()})
    except (ValueError, ValidationError) as error:
        return f"speed probe printed no result: {str(error)[:200]}"
    directory = str(PurePosixPath(path).parent)
    host.run(f"mkdir -p {shlex.quote(directory)}", timeout=15)
    host.write_text(path, speeds.model_dump_json())
    return speeds
