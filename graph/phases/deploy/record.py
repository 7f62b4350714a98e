"""deploy.json, the deploy's full result in the run folder, read typed (tools/service/deploy_result.py's
DeployResult) by what reads a run (its report, the dashboard, `eyas status`, `eyas runs`, `eyas rollback`, the chat)
without the deploy phase's own imports (LangGraph, the service tools)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from eyas.graph.runs import RunDir
from eyas.tools.errors import EyasError
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.config import format_validation_error

DEPLOY_FILE = "deploy.json"  # the full result in the run folder (owner-only): probes, drop-in, argv


class DeployRecordError(EyasError, ValueError):
    """A deploy.json that is not a deploy's result: one paragraph for the command that needed it, and a ValueError
    for the listings, which set a damaged run aside and go on with the others (graph/run_damage.py)."""


def deploy_record(run: RunDir) -> DeployResult | None:
    """The run's deploy.json, typed; None when no drafter was put into production (the file is not there)."""
    return read_deploy(run.root / DEPLOY_FILE)


def read_deploy(path: Path) -> DeployResult | None:
    """A deploy.json, typed: a file written before a field existed reads with that field's default; one that is
    not a deploy's result is refused in one paragraph."""
    if not path.exists():
        return None
    try:
        return DeployResult.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        problems = "; ".join(format_validation_error(exc))
        raise DeployRecordError(
            f"{path} is not a deploy's result ({problems}). Restore it from a copy, or delete it if production no "
            "longer runs that deploy (the run's report then shows the deploy phase's own outcome)."
        ) from None
