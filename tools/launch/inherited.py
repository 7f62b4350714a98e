"""Every vLLM that eyas starts is production's launch with as little changed as it must.

Production's unit says how the model really loads: tensor/pipeline/data-parallel sizes, --trust-remote-code,
quantization, dtype, max-model-len, gpu-memory-utilization, chat template, served name, and the NCCL_* and
CUDA_* environment. A server started with vLLM's defaults instead cannot load a model that needs eight GPUs.
So the servers eyas starts (evaluation, the vllm extraction backend, the deployed service) take all of it, and
eyas replaces only what each server must set itself: port and host (its own loopback port), the
speculative and kv-transfer configs, and what a CPU-only vLLM needs. What it leaves out, it says why.

The workloads cannot import eyas: they get `InheritedLaunch.job_argument()` (JSON: the flags as [flag, value]
pairs, None for a bare flag) and merge it with their own flags (tools/workloads/vllm_server.merge_flags);
the environment travels as the job's environment.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from eyas.tools.launch.unit_file import UnitFile, VllmInvocation
from eyas.tools.workloads.vllm_server import API_KEY_ENV, BASE_FLAGS, flag_name, merge_flags, server_argv

# Left out of every server eyas starts, with the reason the gate shows.
DROPPED = {
    "--api-key": "eyas's own servers listen on 127.0.0.1 only and take no key",
    "--ssl-keyfile": "eyas's own servers speak plain HTTP on 127.0.0.1",
    "--ssl-certfile": "eyas's own servers speak plain HTTP on 127.0.0.1",
    "--ssl-ca-certs": "eyas's own servers speak plain HTTP on 127.0.0.1",
    "--uds": "eyas's own servers listen on a TCP port",
}
READY_MARGIN_S = 600.0  # at least ten minutes: a CPU-only vLLM compiles for minutes before it answers
READY_FACTOR = 1.5  # a loaded host (eyas's own jobs, a cold page cache) loads slower than production did
# Production's environment that eyas's servers must not take: vLLM reads VLLM_API_KEY as --api-key, and eyas's own
# clients (extraction, the online fetch, evaluation) send no key, so every request would be refused with 401. A key in
# the job's own environment is dropped by the workloads (vllm_server.server_env).
DROPPED_ENV = {API_KEY_ENV: DROPPED["--api-key"]}


class InheritedLaunch(BaseModel):
    """Production's launch as eyas's servers take it, with what was kept, replaced and left out."""

    model_config = ConfigDict(frozen=True)

    flags: list[tuple[str, str | None]] = Field(description="production's flags kept, in order; None: bare flag")
    env: dict[str, str] = Field(description="production's Environment=, for the job's environment")
    inherited: list[str] = Field(description="flag and variable names taken from production")
    overridden: list[str] = Field(description="flags each eyas server sets itself, with their reason")
    dropped: list[str] = Field(description="what production has that eyas's servers do not, with the reason")
    source: str = Field(description="where production's launch was read")

    def job_argument(self) -> str:
        """The JSON that a workload's --inherit flag takes."""
        return json.dumps([list(pair) for pair in self.flags])

    def server_argv(self, python: str, model: str, port: int, *own: str) -> list[str]:
        """The argv a workload builds from this launch and its own flags (the dry run and the gates show it)."""
        inherited: list[list[str | None]] = [list(pair) for pair in self.flags]
        return server_argv(python, Path(model), port, *merge_flags(inherited, *own))

    def summary(self) -> dict[str, list[str] | str]:
        """For a gate: what was inherited, overridden and dropped."""
        return {"source": self.source, "inherited": self.inherited, "overridden": self.overridden,
                "dropped": self.dropped}  # fmt: skip


def inherit_launch(
    unit: UnitFile | None, own: Iterable[str] = (), *, source: str = "the production unit"
) -> InheritedLaunch:
    """Production's flags and environment for a server that sets `own` flags itself (names like
    "--speculative-config"; BASE_FLAGS always). With no unit, or one that does not start vLLM, nothing is
    inherited and the gate says so."""
    own_names = {flag_name(name) for name in (*BASE_FLAGS, *own)}
    if unit is None or unit.vllm is None:
        why = "no production unit was read" if unit is None else "the production unit does not start vLLM"
        return InheritedLaunch(flags=[], env={}, inherited=[], overridden=[], dropped=[why], source=source)
    named = _named_flags(unit.vllm)
    production = dict(named)
    if unit.vllm.model is not None:
        production.setdefault("--model", unit.vllm.model)
    flags = [(name, value) for name, value in named if name not in own_names and name not in DROPPED]
    inherited = [name for name, _ in flags]
    dropped = [f"{name}: {DROPPED[name]}" for name, _ in named if name in DROPPED]
    overridden = [
        f"{name} (production: {_shown(production[name])})" if name in production else f"{name} (eyas sets it)"
        for name in sorted(own_names)
    ]
    if unit.vllm.positional[1:]:
        dropped.append(f"positional arguments {shlex.join(unit.vllm.positional[1:])}: eyas passes --model itself")
    dropped += [f"EnvironmentFile={path}: not read; put what the servers need in Environment=" for path in
                unit.environment_files]  # fmt: skip
    env = {name: value for name, value in unit.environment.items() if name not in DROPPED_ENV}
    dropped += [
        f"{name} (environment): {DROPPED_ENV[name]}" for name in sorted(unit.environment) if name in DROPPED_ENV
    ]
    inherited += [f"{name} (environment)" for name in sorted(env)]
    return InheritedLaunch(
        flags=flags, env=env, inherited=inherited, overridden=overridden, dropped=dropped, source=source
    )


def ready_timeout_s(load_s: float) -> float:
    """How long a server eyas starts may take to become ready: production's load time with a margin."""
    return round(load_s * READY_FACTOR + READY_MARGIN_S)


def _named_flags(vllm: VllmInvocation) -> list[tuple[str, str | None]]:
    named = [(flag_name(raw), None if value is True else str(value)) for raw, value in vllm.flags.items()]
    aliases = {"--tp": "--tensor-parallel-size", "--pp": "--pipeline-parallel-size", "--dp": "--data-parallel-size"}
    return [(aliases.get(name, name), value) for name, value in named]


def _shown(value: str | None) -> str:
    if value is None:
        return "set"
    return value if len(value) <= 80 else value[:77] + "..."
