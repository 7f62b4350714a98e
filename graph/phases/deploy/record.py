"""deploy.json, the deploy's full result in the run folder, for what reads a run (its report, `eyas status`, `eyas
runs`) without the deploy phase's own imports (LangGraph, the service tools)."""

from __future__ import annotations

import json
from typing import Any

from eyas.graph.runs import RunDir

DEPLOY_FILE = "deploy.json"  # the full result in the run folder (owner-only): probes, drop-in, argv


def deploy_record(run: RunDir) -> dict[str, Any] | None:
    """deploy.json as plain JSON (what the headline reads), or None when no drafter was put into production."""
    path = run.root / DEPLOY_FILE
    return json.loads(path.read_text()) if path.exists() else None
