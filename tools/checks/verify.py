"""State verification: every check of a run at once, so the wall time is the slowest check, not the sum."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from eyas.tools.checks.binaries import check_binaries
from eyas.tools.checks.compat import check_compat
from eyas.tools.checks.disk import check_disk
from eyas.tools.checks.drafter import check_drafter
from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.health import check_health
from eyas.tools.checks.packages import check_packages
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.server_flags import check_server_flags
from eyas.tools.checks.service import check_service
from eyas.tools.errors import EyasError, HostUnreachable
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.recording.task_scope import submit_in_task

Check = Callable[[CheckContext], CheckResult]

CHECKS: dict[str, Check] = {
    "health": check_health,
    "service": check_service,
    "gpus": check_gpus,
    "disk": check_disk,
    "binaries": check_binaries,
    "packages": check_packages,
    "drafter": check_drafter,
    "compat": check_compat,
    "server_flags": check_server_flags,
}
# Checks that only run when their subject is configured, so a run without one records no trace of them.
APPLIES: dict[str, Callable[[CheckContext], bool]] = {"drafter": lambda ctx: ctx.drafter_base is not None}


class VerifyReport(BaseModel):
    results: list[CheckResult]
    wall_s: float
    sum_of_checks_s: float

    @property
    def worst(self) -> Status:
        statuses = {result.status for result in self.results}
        return next((status for status in (Status.FAIL, Status.WARN) if status in statuses), Status.OK)

    @property
    def unreachable(self) -> bool:
        """Whether a check could not reach its host."""
        return any(result.facts.get("unreachable") for result in self.results)

    def result(self, name: str) -> CheckResult:
        return next(result for result in self.results if result.name == name)


def _timed(name: str, check: Check, ctx: CheckContext, clock: Clock) -> CheckResult:
    started = clock.monotonic()
    try:
        result = check(ctx)
    except EyasError as exc:
        # A host that cannot be reached is a finding about the host, reported like any other (and marked, so that
        # `eyas verify` can exit with its own status).
        facts = {"unreachable": True} if isinstance(exc, HostUnreachable) else {}
        result = CheckResult(name=name, status=Status.FAIL, message=str(exc), facts=facts)
    except Exception as exc:
        # A check that breaks on an answer it did not foresee must not take the other checks' findings with it.
        message = f"The {name} check broke on what it read ({type(exc).__name__}: {exc}); the other checks still ran."
        result = CheckResult(name=name, status=Status.FAIL, message=message, facts={"error": type(exc).__name__})
    return result.model_copy(update={"duration_s": round(clock.monotonic() - started, 3)})


def applicable(ctx: CheckContext) -> list[str]:
    """The checks a full verify runs for this context: all, less those whose subject is not configured."""
    return [name for name in CHECKS if APPLIES.get(name, lambda _: True)(ctx)]


def verify(ctx: CheckContext, names: list[str] | None = None, clock: Clock = SYSTEM_CLOCK) -> VerifyReport:
    """Run the named checks (all by default) concurrently and collect their results in order."""
    selected = names or applicable(ctx)
    unknown = sorted(set(selected) - set(CHECKS))
    if unknown:
        raise EyasError(f"Unknown check(s) {', '.join(unknown)}; the checks are: {', '.join(CHECKS)}.")
    started = clock.monotonic()
    with ThreadPoolExecutor(max_workers=len(selected), thread_name_prefix="verify") as pool:
        # Each check is its own task, so a transcript replays each in its own order.
        futures = [submit_in_task(pool, name, _timed, name, CHECKS[name], ctx, clock) for name in selected]
        results = [future.result() for future in futures]
    return VerifyReport(
        results=results,
        wall_s=round(clock.monotonic() - started, 3),
        sum_of_checks_s=round(sum(result.duration_s for result in results), 3),
    )
