"""The operator's tools for the production service: its status, a wait while it loads, a restart, and the deploy
and rollback of a run's drafter.

Status and the wait only read. Restart, deploy and rollback change what production serves, so each asks the
operator first and shows the exact effect: production's command line before and after, and the downtime to
expect. The service is reached through the chat's hosts, HTTP and clock (recorded, so a chat replays); deploy
and rollback go through the pipeline controls, which run `eyas deploy` / `eyas rollback` for the run.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from pydantic import BaseModel, Field

from eyas.agents.toolbox import ToolDef
from eyas.tools.checks.health import check_health
from eyas.tools.checks.loading import wait_until_loaded
from eyas.tools.checks.result import CheckContext, Status, config_checks
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.service.base import Service
from eyas.tools.service.choose import production_service
from eyas.tools.settings.config import EyasConfig

MAX_WAIT_S = 4 * 3600.0  # the longest wait a tool call may ask for (the motivating model loads in 22 minutes)
LOG_LINES = 15


class DrafterControl(Protocol):
    """What the service tools need of the pipeline run: its drafter's deploy, rollback, and what each would do."""

    def deploy_effect(self, drafter: str | None, k: int | None) -> str: ...

    def deploy(self, drafter: str | None, k: int | None) -> str: ...

    def rollback_effect(self) -> str: ...

    def rollback(self) -> str: ...


class ServiceStatus(BaseModel):
    """Production's service: whether it runs (service manager, main pid), the command line its next start runs
    (its unit with eyas's drop-in, if one is deployed), the deep health check (up AND generating) and the end of
    its log when it is not healthy. A read: it asks nothing."""


class WaitForServer(BaseModel):
    """Wait for a production server that is still loading (its process runs, it does not answer yet): poll the
    health check, with a progress line every poll, until it is healthy or max_wait_s has passed, and say which.
    Returns at once when the server is healthy already, or not running at all. A read: it asks nothing."""

    max_wait_s: float = Field(1800.0, gt=0, le=MAX_WAIT_S, description="the longest wait, in seconds")


class RestartService(BaseModel):
    """Restart production: stop it, start it with its unit's command line, and wait (at most max_wait_s) until it
    passes the deep health check; it serves nothing until it has loaded again. Asks the operator first, showing
    the command line it runs and the downtime to expect."""

    max_wait_s: float = Field(1800.0, gt=0, le=MAX_WAIT_S, description="the longest wait for health, in seconds")


class DeployDrafter(BaseModel):
    """Deploy the pipeline run's trained drafter (or `drafter`, a directory on the target host) into production:
    add --speculative-config to its command line, restart it, measure acceptance on production's own counters
    over probe requests, and roll back unless the drafter passes the run's thresholds. Asks the operator first,
    showing production's command line before and after, and the downtime to expect."""

    drafter: str | None = Field(None, min_length=1, max_length=1000, description="default: the run's drafter")
    k: int | None = Field(None, ge=1, le=16, description="speculative tokens per step; default: the run's")


class RollbackDrafter(BaseModel):
    """Take the drafter eyas deployed out of production: remove eyas's drop-in, restart production and check that
    it is healthy with its old command line again. Asks the operator first, showing the command line before and
    after, and the downtime to expect."""


def downtime(config: EyasConfig, measured_s: float | None) -> str:
    """The downtime a restart costs, and where the figure comes from."""
    if measured_s is not None:
        return f"about {measured_s:.0f} s (its last restart from this chat)"
    if config.target.load_time_s is not None:
        return f"about {config.target.load_time_s:.0f} s (target.load_time_s)"
    return "as long as the model takes to load (not measured yet; set target.load_time_s to plan it)"


def command_change(before: list[str], after: list[str]) -> str:
    """Production's command line before and after an action, in full."""
    if before == after:
        return f"command line (unchanged): {shlex.join(before)}"
    return f"command line before: {shlex.join(before)}\n    after: {shlex.join(after)}"


def service_tools(
    config: EyasConfig,
    host: Callable[[], Host],
    http: HttpClient,
    clock: Clock,
    progress: Callable[[str], None],
    control: DrafterControl | None,
) -> list[ToolDef]:
    """The service tools; deploy and rollback only with a pipeline run (`control`) whose drafter they move."""
    measured: list[float] = []  # load times of the restarts this chat made, newest last
    effects = Effects()

    def service() -> Service:
        return production_service(config, host(), http, clock)

    def checks() -> CheckContext:
        return config_checks(config, host(), http)

    def status(args: ServiceStatus) -> str:
        production = service()
        state = production.status()
        health = production.health()
        running = ("running" if state.active else "NOT running") + (
            f", main pid {state.main_pid}" if state.main_pid else ""
        )
        lines = [
            f"{state.name} ({state.backend}): {running}" + (f"; {state.detail}" if state.detail else ""),
            f"next start runs: {shlex.join(production.effective_unit().exec_start)}",
            f"health: {health.status.value}: {health.message}",
        ]
        if health.status is Status.FAIL:
            lines.append(f"log ends:\n{production.log_tail(LOG_LINES)}")
        return "\n".join(lines)

    def wait(args: WaitForServer) -> str:
        context = checks()
        bounded = context.target.model_copy(update={"load_wait_s": args.max_wait_s})
        context = replace(context, target=bounded)
        waited = wait_until_loaded(context, check_health(context), clock, progress)
        if waited.outcome == "not loading" and waited.result.status is not Status.FAIL:
            return f"the server is healthy; nothing to wait for ({waited.result.message})"
        if waited.outcome == "not loading":
            return f"the server is not loading (its process does not run): {waited.result.message}"
        return waited.note

    def restart_effect(args: RestartService) -> str:
        argv = service().effective_unit().exec_start
        expected = downtime(config, measured[-1] if measured else None)
        return (
            f"restart production ({config.target.base_url}); it serves nothing until it has loaded again\n"
            f"    {command_change(argv, argv)}\n    expected downtime: {expected}"
        )

    def restart(args: RestartService) -> str:
        production = service()
        production.restart()
        production.wait_healthy(args.max_wait_s, progress)
        if production.last_start_s is not None:
            measured.append(production.last_start_s)
        return f"{production.name} restarted and healthy after {production.last_start_s} s"

    defs = [
        ToolDef(ServiceStatus, status),
        ToolDef(WaitForServer, wait),
        ToolDef(RestartService, effects.acting(restart), effects.asked(restart_effect)),
    ]
    if control is not None:
        drafters = control
        defs += [
            ToolDef(
                DeployDrafter,
                effects.acting(lambda a: drafters.deploy(a.drafter, a.k)),
                effects.asked(lambda a: drafters.deploy_effect(a.drafter, a.k)),
            ),
            ToolDef(
                RollbackDrafter,
                effects.acting(lambda a: drafters.rollback()),
                effects.asked(lambda a: drafters.rollback_effect()),
            ),
        ]
    return defs


class Effects:
    """Confirmation texts worked out once per call: the chat asks for a call's text several times while it routes,
    asks and runs it, and reading the host each time would cost (and record) as many reads. Any change made by
    one of these tools makes every text be worked out again."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def asked(self, effect: Callable[[Any], str]) -> Callable[[Any], str]:
        def text(args: BaseModel) -> str:
            key = f"{type(args).__name__}:{args.model_dump_json()}"
            if key not in self._seen:
                self._seen[key] = effect(args)
            return self._seen[key]

        return text

    def acting(self, run: Callable[[Any], str]) -> Callable[[Any], str]:
        def act(args: BaseModel) -> str:
            self._seen.clear()
            return run(args)

        return act
