"""Which GPUs the host has, how full they are, who holds their memory, and how they are linked.

A host whose production server holds nearly all of every GPU is the normal case eyas is made for, so the
check names the holder: production (its unit's process tree), or another process.
"""

from __future__ import annotations

import shlex
from typing import Any

from eyas.tools.checks.nvidia_smi import (
    NVIDIA_SMI_APPS_ARGS,
    NVIDIA_SMI_QUERY_ARGS,
    NVIDIA_SMI_UUID_ARGS,
    GpuInfo,
    parse_compute_apps,
    parse_gpu_csv,
    parse_gpu_uuids,
    parse_topology,
)
from eyas.tools.checks.production_processes import production_processes
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.service import read_unit

# A GPU with less free than this share of its memory cannot take a phase beside whoever holds it.
BUSY_SHARE = 0.5


def check_gpus(ctx: CheckContext) -> CheckResult:
    smi = ctx.host.which("nvidia-smi")
    if smi is None:
        return CheckResult(
            name="gpus",
            status=Status.WARN,
            message="no GPU: nvidia-smi is not on the PATH of a non-interactive shell (CPU-only host?)",
            facts={"count": 0, "gpus": []},
        )
    query = ctx.host.run(shlex.join([smi, *NVIDIA_SMI_QUERY_ARGS]), timeout=30)
    if not query.ok:
        detail = (query.stderr or query.stdout).strip()[:300]
        return CheckResult(name="gpus", status=Status.FAIL, message=f"nvidia-smi failed: {detail}", facts={})
    try:
        gpus = parse_gpu_csv(query.stdout)
    except ValueError as exc:
        return CheckResult(name="gpus", status=Status.FAIL, message=str(exc), facts={"raw": query.stdout[:500]})
    facts: dict[str, Any] = {"count": len(gpus), "gpus": [_gpu_facts(gpu) for gpu in gpus]}
    topo = ctx.host.run(f"{shlex.quote(smi)} topo -m", timeout=30)
    if topo.ok:
        facts.update(parse_topology(topo.stdout))
    names = sorted({gpu.name for gpu in gpus})
    used = sum(gpu.memory_used_mib for gpu in gpus) / max(1, sum(gpu.memory_total_mib for gpu in gpus))
    message = f"{len(gpus)} x {', '.join(names)}, {used:.0%} memory in use"
    if "interconnect" in facts:
        message += f", interconnect {facts['interconnect']}"
    holders = _holders(ctx, smi, facts)
    status = Status.WARN if holders else Status.OK
    return CheckResult(name="gpus", status=status, message="; ".join([message, *holders]), facts=facts)


def _gpu_facts(gpu: GpuInfo) -> dict[str, Any]:
    return {**gpu.model_dump(), "memory_free_mib": gpu.memory_total_mib - gpu.memory_used_mib, "processes": []}


def _holders(ctx: CheckContext, smi: str, facts: dict[str, Any]) -> list[str]:
    """Fill each GPU's processes and production mark into `facts`; say who holds GPUs too full for a phase."""
    try:
        uuids = parse_gpu_uuids(ctx.host.run(shlex.join([smi, *NVIDIA_SMI_UUID_ARGS]), timeout=30).stdout)
        apps = parse_compute_apps(ctx.host.run(shlex.join([smi, *NVIDIA_SMI_APPS_ARGS]), timeout=30).stdout)
    except ValueError as exc:
        facts["processes_error"] = str(exc)
        return [f"which processes hold the GPUs is unknown ({exc})"]
    production = production_processes(ctx, read_unit(ctx))
    production_pids = set(production.pids) if production else set()
    by_index = {gpu["index"]: gpu for gpu in facts["gpus"]}
    for app in apps:
        gpu = by_index.get(uuids.get(app.gpu_uuid, -1))
        if gpu is not None:
            gpu["processes"].append({**app.model_dump(), "production": app.pid in production_pids})
    for gpu in facts["gpus"]:
        gpu["production"] = any(process["production"] for process in gpu["processes"])
    held = [gpu for gpu in facts["gpus"] if gpu["production"]]
    if production:
        facts["production"] = {
            **production.model_dump(),
            "gpus": [gpu["index"] for gpu in held],
            "used_mib": sum(_used(gpu, production_pids) for gpu in held),
        }
    found = []
    if held:
        share = sum(_used(gpu, production_pids) for gpu in held) / sum(gpu["memory_total_mib"] for gpu in held)
        found.append(
            f"production (pid {production.main_pid if production else '?'}) holds {len(held)} of "
            f"{len(facts['gpus'])} GPUs ({share:.0%} of their memory): a GPU phase must stop it or fit beside it"
        )
    for gpu in facts["gpus"]:
        if gpu["production"] or gpu["memory_free_mib"] >= BUSY_SHARE * gpu["memory_total_mib"]:
            continue
        others = ", ".join(f"pid {p['pid']} {p['name']}" for p in gpu["processes"]) or "processes nvidia-smi cannot see"
        found.append(f"GPU {gpu['index']} has {gpu['memory_free_mib']} MiB free, held by {others}")
    return found


def _used(gpu: dict[str, Any], pids: set[int]) -> int:
    return sum(p["used_mib"] or 0 for p in gpu["processes"] if p["pid"] in pids)
