"""STAND-IN for systemd, for hosts where systemd is not PID 1 (containers, CI, the embedded target).

It does what systemd would do with the unit: read the unit file and its drop-ins (`UNIT_FILE.d/*.conf`, in
name order, systemd's override rules), and run the effective `ExecStart=` with its `Environment=` and
`WorkingDirectory=` as a detached job (tools/jobs), whose process group `stop` ends. `eyas target up` starts
the embedded target this way; the pipeline and deploy use it wherever the host has no systemd.
"""

from __future__ import annotations

import shlex

from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.launch.unit_file import UnitFile, parse_unit_file
from eyas.tools.service.base import DROP_IN, HealthCheck, Service, ServiceError, ServiceStatus


class UnitJobService(Service):
    """A unit file run as a detached job: the stand-in for `systemctl` where systemd is not PID 1."""

    backend = "stand-in"

    def __init__(
        self, host: Host, unit_file: str, workdir: str, job_id: str, health: HealthCheck, clock: Clock
    ) -> None:
        super().__init__(health, clock)
        self.host = host
        self.unit_file = unit_file
        self.name = unit_file.rsplit("/", 1)[-1]
        self.job_id = job_id
        self.jobs = Jobs(host, workdir)

    def effective_unit(self) -> UnitFile:
        """The unit with its drop-ins applied, as `systemctl cat` would print it and systemd would run it."""
        q = shlex.quote
        folder = f"{self.unit_file}.d"
        text = self.host.run(
            f'cat {q(self.unit_file)} && for f in {q(folder)}/*.conf; do [ -f "$f" ] && cat "$f"; done; true',
            timeout=15,
        ).check(f"reading {self.unit_file}")
        try:
            return parse_unit_file(text.stdout)
        except ValueError as exc:
            raise ServiceError(f"{self.unit_file}: {exc}") from None

    def job_spec(self) -> JobSpec:
        unit = self.effective_unit()
        return JobSpec(job_id=self.job_id, argv=unit.exec_start, env=unit.environment, cwd=unit.working_directory)

    def status(self) -> ServiceStatus:
        state = self.jobs.status(self.job_id)
        return ServiceStatus(
            backend=self.backend, name=self.name, active=state.status is JobStatus.RUNNING, main_pid=state.pid,
            detail=f"stand-in job {self.job_id}: {state.describe()}",
        )  # fmt: skip

    def stop(self) -> None:
        if self.jobs.status(self.job_id).status is JobStatus.RUNNING:
            self.jobs.cancel(self.job_id, grace_s=20)

    def _start(self) -> None:
        state = self.jobs.status(self.job_id)
        if state.status is JobStatus.RUNNING:
            return
        spec = self.job_spec()
        if state.status is not JobStatus.ABSENT:
            self.jobs.forget(self.job_id)
        self.jobs.launch(spec)

    def log_tail(self, lines: int = 25) -> str:
        return self.jobs.tail(self.job_id, lines)

    def drop_in_path(self, name: str = DROP_IN) -> str:
        return f"{self.unit_file}.d/{name}"

    def reload(self) -> None:
        """Nothing to reload: the stand-in reads the unit and its drop-ins at every start."""
