"""Wait for a production server that is still loading, instead of failing on it.

A server whose process runs but refuses connections (vLLM's API server listens only once the engine is up) or
answers /health with an error is loading, not broken: the motivating model takes about 22 minutes. verify and
plan wait for it, showing progress, until it is healthy or the configured deadline (target.load_wait_s) passes,
and say which of the two happened.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from eyas.tools.checks.health import check_health
from eyas.tools.checks.production_processes import production_processes
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.service import read_unit
from eyas.tools.hosts.clock import Clock

LOADING_TIERS = ("tcp", "health")  # how a loading vLLM fails the health check
POLL_S = 10.0


class LoadWait(BaseModel):
    outcome: str  # "healthy" | "deadline" | "broken" (up, but failing a later tier) | "not loading"
    waited_s: float
    result: CheckResult

    @property
    def note(self) -> str:
        if self.outcome == "healthy":
            return f"the server finished loading after {self.waited_s:.0f} s of waiting and is healthy"
        if self.outcome == "deadline":
            return (
                f"the server was still not healthy after {self.waited_s:.0f} s of waiting (target.load_wait_s): "
                f"{self.result.message}"
            )
        if self.outcome == "broken":
            waited = f"{self.waited_s:.0f} s"
            return f"the server finished loading after {waited} but fails its health check: {self.result.message}"
        return self.result.message


def is_loading(ctx: CheckContext, health: CheckResult) -> bool:
    """A failed health check at connect or /health while production's main process runs."""
    if health.status is not Status.FAIL or health.facts.get("failed_tier") not in LOADING_TIERS:
        return False
    return production_processes(ctx, read_unit(ctx)) is not None


def wait_until_loaded(
    ctx: CheckContext, health: CheckResult, clock: Clock, progress: Callable[[str], None]
) -> LoadWait:
    """Poll the deep health check while the server loads, until it passes or target.load_wait_s has passed."""
    deadline_s = ctx.target.load_wait_s
    if deadline_s <= 0 or not is_loading(ctx, health):
        return LoadWait(outcome="not loading", waited_s=0.0, result=health)
    started = clock.monotonic()
    result = health
    while True:
        waited = clock.monotonic() - started
        if waited >= deadline_s:
            return LoadWait(outcome="deadline", waited_s=waited, result=result)
        url = ctx.target.base_url
        progress(f"the server at {url} is still loading: waited {waited:.0f} s of at most {deadline_s:.0f} s")
        clock.sleep(min(POLL_S, deadline_s - waited))
        result = check_health(ctx)
        if result.status is not Status.FAIL:
            return LoadWait(outcome="healthy", waited_s=clock.monotonic() - started, result=result)
        if result.facts.get("failed_tier") not in LOADING_TIERS:
            return LoadWait(outcome="broken", waited_s=clock.monotonic() - started, result=result)
