"""`eyas plan`'s production downtime: what each GPU phase means for production on this host, and the downtime
windows (tools/planning/downtime_window.py), worked out by the run's own plan code (graph/phases/plan/node.py's
production_plan) from the host's GPUs as verify reads them, so `eyas plan` and `eyas run` cannot disagree."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.verify.node import gpu_summary
from eyas.graph.runs import RunDir
from eyas.graph.state import RunPlan, RunState
from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.result import CheckContext
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.downtime_window import DowntimeWindow
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import Sizes


@contextmanager
def host_plan_context(cfg: EyasConfig, host: Host, sizes: Sizes) -> Iterator[tuple[RunContext, RunState]]:
    """A run's context and the state its plan node would see on this host (the sizes and the GPUs as verify reads
    them), for the run's own plan code; nothing is written to the scratch run folder."""
    checks = CheckContext(
        host=host, host_config=cfg.host(), target=cfg.target, http=HttpClient(), data_path=cfg.host().workdir
    )
    state: RunState = {"sizes": sizes.model_dump(), "gpus": gpu_summary(check_gpus(checks).facts)}
    with tempfile.TemporaryDirectory(prefix="eyas-plan-") as scratch:
        yield RunContext(config=cfg, host=host, http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(Path(scratch))), state


def production_downtime(run: RunPlan) -> dict[str, Any]:
    """Per GPU phase production's keep, stop or reuse, its load time, and the downtime windows, as JSON, from the
    run's own plan."""
    return {
        "phases": {phase: entry.production.model_dump() for phase, entry in run.phases.items() if entry.production},
        "load": run.production_load.model_dump() if run.production_load else None,
        "downtime_windows": [window.model_dump(mode="json") for window in run.downtime_windows()],
    }


def downtime_row(production: dict[str, Any]) -> str:
    """The plan table's row: each window in words, or that production keeps running."""
    windows = [DowntimeWindow.model_validate(window) for window in production["downtime_windows"]]
    if not windows:
        return "production keeps running: no phase needs it stopped"
    return "; ".join(window.line() for window in windows)
