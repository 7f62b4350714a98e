"""Verify state before acting: is the server up AND generating, how was it started, GPUs, disk, versions."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.state import RunState
from eyas.tools.checks.loading import wait_until_loaded
from eyas.tools.checks.remote_code import trust_remote_code
from eyas.tools.checks.result import CheckContext, config_checks
from eyas.tools.checks.verify import VerifyReport, verify


def gpu_summary(facts: dict[str, Any]) -> dict[str, Any]:
    """What the plan needs of the gpus check: each GPU's memory, whether production holds it, production's pids."""
    keys = ("index", "memory_total_mib", "memory_free_mib", "production")
    gpus = [{key: gpu[key] for key in keys if key in gpu} for gpu in facts.get("gpus", [])]
    return {"count": len(gpus), "gpus": gpus, "production": facts.get("production")}


def verify_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    checks = config_checks(ctx.config, ctx.host, ctx.http)
    report = verify(checks, clock=ctx.clock)
    report = _after_loading(report, checks, ctx)
    for result in report.results:
        ctx.on_note(f"verify {result.name}: {result.status.value}: {result.message}")
    disk = report.result("disk").facts
    return {
        "phase": "verify",
        "verification": {r.name: {"status": r.status.value, "message": r.message} for r in report.results},
        "free_disk_bytes": int(disk.get("free_bytes", 0)),
        "gpus": gpu_summary(report.result("gpus").facts),
        "trust_remote_code": trust_remote_code(ctx.config.target.trust_remote_code, report.result("service").facts),
        # What the plan narrows to each phase's chosen path (tools/planning/paths.py).
        "compat": _facts(report, "compat", ("versions", "table")),
        "server_flags": _facts(report, "server_flags", ("servers",)),
    }


def _facts(report: VerifyReport, name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """The named check's facts the plan uses (the help texts and probe output stay out of the checkpoint)."""
    facts = report.result(name).facts
    return {key: facts[key] for key in keys if key in facts}


def _after_loading(report: VerifyReport, checks: CheckContext, ctx: RunContext) -> VerifyReport:
    """The report with the health check redone once a server found loading has loaded (or the wait ended)."""
    health = report.result("health")
    waited = wait_until_loaded(checks, health, ctx.clock, lambda line: ctx.on_note(f"verify health: {line}"))
    if waited.outcome == "not loading":
        return report
    result = waited.result.model_copy(update={"message": waited.note})
    results = [result if r.name == "health" else r for r in report.results]
    return report.model_copy(update={"results": results})
