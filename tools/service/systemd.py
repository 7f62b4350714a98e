"""The production service as systemd runs it: `systemctl` to act, `journalctl` for its log.

Drop-ins go to /etc/systemd/system/UNIT.d/ (systemd.unit(5)); `daemon-reload` makes systemd read them.
eyas needs the rights to do this on the host (root, or a user systemd lets manage the unit).
"""

from __future__ import annotations

import shlex

from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.launch.unit_file import UnitFile, parse_unit_file
from eyas.tools.service.base import DROP_IN, HealthCheck, Service, ServiceError, ServiceStatus

DROP_IN_ROOT = "/etc/systemd/system"


def has_systemd(host: Host) -> bool:
    """True when systemd is PID 1 there: the test sd_booted(3) makes."""
    return host.run("test -d /run/systemd/system", timeout=15).ok


class SystemdService(Service):
    backend = "systemd"

    def __init__(
        self, host: Host, unit: str, health: HealthCheck, clock: Clock, *,
        systemctl: str = "systemctl", journalctl: str = "journalctl",
    ) -> None:  # fmt: skip
        super().__init__(health, clock)
        self.host = host
        self.name = unit
        self._systemctl = systemctl
        self._journalctl = journalctl

    def _ctl(self, *args: str, timeout: float = 120.0) -> str:
        command = shlex.join([self._systemctl, *args])
        result = self.host.run(command, timeout=timeout)
        if not result.ok:
            raise ServiceError(
                f"`{command}` failed on {self.host.name} (exit {result.rc}): "
                f"{(result.stderr.strip() or result.stdout.strip())[-400:] or 'no output'}"
            )
        return result.stdout

    def status(self) -> ServiceStatus:
        shown = self._ctl("show", "--property=ActiveState,SubState,MainPID", self.name, timeout=15)
        fields = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
        pid = int(fields.get("MainPID", "0") or 0)
        state = fields.get("ActiveState", "unknown")
        return ServiceStatus(
            backend=self.backend, name=self.name, active=state in ("active", "activating", "reloading"),
            main_pid=pid or None, detail=f"{state} ({fields.get('SubState', '?')})",
        )  # fmt: skip

    def stop(self) -> None:
        # systemctl stop waits for the unit's stop job (TimeoutStopSec), so the GPUs are free when it returns.
        self._ctl("stop", self.name, timeout=900)

    def _start(self) -> None:
        self._ctl("start", "--no-block", self.name)

    def effective_unit(self) -> UnitFile:
        try:
            return parse_unit_file(self._ctl("cat", "--no-pager", self.name, timeout=15))
        except ValueError as exc:
            raise ServiceError(f"systemctl cat {self.name}: {exc}") from None

    def log_tail(self, lines: int = 25) -> str:
        command = shlex.join([self._journalctl, "--unit", self.name, "--lines", str(lines), "--no-pager"])
        result = self.host.run(command, timeout=30)
        return result.stdout.strip() or result.stderr.strip()

    def drop_in_path(self, name: str = DROP_IN) -> str:
        return f"{DROP_IN_ROOT}/{self.name}.d/{name}"

    def reload(self) -> None:
        self._ctl("daemon-reload")
