"""Which GPUs the host has, how full they are, and whether they talk over NVLink or PCIe."""

from __future__ import annotations

import shlex

from eyas.tools.checks.nvidia_smi import NVIDIA_SMI_QUERY_ARGS, parse_gpu_csv, parse_topology
from eyas.tools.checks.result import CheckContext, CheckResult, Status


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
    facts = {"count": len(gpus), "gpus": [gpu.model_dump() for gpu in gpus]}
    topo = ctx.host.run(f"{shlex.quote(smi)} topo -m", timeout=30)
    if topo.ok:
        facts.update(parse_topology(topo.stdout))
    names = sorted({gpu.name for gpu in gpus})
    used = sum(gpu.memory_used_mib for gpu in gpus) / max(1, sum(gpu.memory_total_mib for gpu in gpus))
    message = f"{len(gpus)} x {', '.join(names)}, {used:.0%} memory in use"
    if "interconnect" in facts:
        message += f", interconnect {facts['interconnect']}"
    return CheckResult(name="gpus", status=Status.OK, message=message, facts=facts)
