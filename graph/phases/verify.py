"""Verify state before acting: is the server up AND generating, how was it started, GPUs, disk, versions."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.state import RunState
from eyas.tools.checks.result import CheckContext
from eyas.tools.checks.verify import verify


def verify_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    report = verify(
        CheckContext(
            host=ctx.host,
            host_config=ctx.host_config,
            target=ctx.config.target,
            http=ctx.http,
            data_path=ctx.host_config.workdir,
        ),
        clock=ctx.clock,
    )
    for result in report.results:
        ctx.on_note(f"verify {result.name}: {result.status.value}: {result.message}")
    disk = report.result("disk").facts
    return {
        "phase": "verify",
        "verification": {r.name: {"status": r.status.value, "message": r.message} for r in report.results},
        "free_disk_bytes": int(disk.get("free_bytes", 0)),
    }
