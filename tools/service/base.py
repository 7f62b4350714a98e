"""The Service interface: what eyas may do to the production server, whatever runs it.

eyas stops production only to free its GPUs and must bring it back healthy, so every start is followed by the
deep health check (a real completion, not just a listening port), and the time that took is kept: it is the
load time the next plan's downtime estimate needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from eyas.tools.checks.result import CheckResult, Status
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.launch.unit_file import UnitFile

Backend = Literal["systemd", "stand-in"]
HealthCheck = Callable[[], CheckResult]
Progress = Callable[[str], None]
# The one drop-in eyas writes (deploy); removing it is the whole rollback. systemd applies drop-ins in name order,
# and the operator's own (override.conf, as `systemctl edit` names it) often sets ExecStart: eyas's sorts last.
DROP_IN = "zz-eyas-drafter.conf"


class ServiceError(EyasError):
    """The production service could not be stopped, started or brought back healthy."""


class ServiceStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    backend: Backend
    name: str
    active: bool
    main_pid: int | None = None
    detail: str = ""


class Service(ABC):
    """A long-running server eyas may stop, start and restart. Subclasses only act; waiting lives here."""

    backend: Backend
    name: str
    host: Host

    def __init__(self, health: HealthCheck, clock: Clock) -> None:
        self._health = health
        self._clock = clock
        self._started_at: float | None = None
        self.last_start_s: float | None = None  # seconds from the last start() to a passing health check

    @property
    def clock(self) -> Clock:
        return self._clock

    @abstractmethod
    def status(self) -> ServiceStatus: ...

    @abstractmethod
    def stop(self) -> None:
        """Stop the service and wait until its process is gone (a no-op when it is stopped)."""

    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def effective_unit(self) -> UnitFile:
        """The unit with its drop-ins applied: the command line the next start runs."""

    @abstractmethod
    def log_tail(self, lines: int = 25) -> str: ...

    @abstractmethod
    def drop_in_path(self, name: str = DROP_IN) -> str:
        """Where a drop-in of this unit goes (systemd's UNIT.d/, or the stand-in's folder beside the unit file)."""

    @abstractmethod
    def reload(self) -> None:
        """Make the service manager read changed drop-ins (systemctl daemon-reload)."""

    def start(self) -> None:
        """Start the service (a no-op when it runs); wait_healthy() measures from here."""
        self._started_at = self._clock.monotonic()
        self._start()

    def restart(self) -> None:
        self.stop()
        self.start()

    def health(self) -> CheckResult:
        return self._health()

    def wait_healthy(self, timeout_s: float, progress: Progress = print, *, poll_s: float = 2.0) -> CheckResult:
        """Wait for the deep health check; fail at once when the process dies, with the end of its log."""
        deadline = self._clock.monotonic() + timeout_s
        last_note = self._clock.monotonic()
        while True:
            status = self.status()
            if not status.active:
                raise ServiceError(
                    f"{self.name} ({self.backend}) stopped while starting ({status.detail or 'not active'}). "
                    f"Its log ends: {self.log_tail(25)}"
                )
            result = self._health()
            if result.status is not Status.FAIL:
                if self._started_at is not None:
                    self.last_start_s = round(self._clock.monotonic() - self._started_at, 1)
                return result
            now = self._clock.monotonic()
            if now > deadline:
                raise ServiceError(
                    f"{self.name} did not pass the health check within {timeout_s:.0f} s ({result.message}); "
                    f"it is still running (pid {status.main_pid}). Its log ends: {self.log_tail(10)}"
                )
            if now - last_note >= 30:
                progress(f"{self.name}: still loading ({result.message}); {deadline - now:.0f} s left")
                last_note = now
            self._clock.sleep(poll_s)
