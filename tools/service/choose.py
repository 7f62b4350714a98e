"""The production service of a config: systemd when the host runs it and the config names the unit, else the
stand-in (tools/service/standin.py) over the configured unit file."""

from __future__ import annotations

from urllib.parse import urlsplit

from eyas.tools.checks.health import check_health
from eyas.tools.checks.result import CheckContext, CheckResult
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.service.base import Service, ServiceError
from eyas.tools.service.standin import UnitJobService
from eyas.tools.service.systemd import SystemdService, has_systemd
from eyas.tools.settings.config import EyasConfig

STANDIN_JOB_PREFIX = "target-server-"  # the stand-in's job id, before its port


def standin_job_id(port: int) -> str:
    """One server per port, so a test session's server never touches the operator's (`eyas target up`'s id)."""
    return f"{STANDIN_JOB_PREFIX}{port}"


def production_service(config: EyasConfig, host: Host, http: HttpClient, clock: Clock) -> Service:
    target = config.target
    host_config = config.host()

    # One context for every health check of this service, so production's key is read from its unit once.
    ctx = CheckContext(host=host, host_config=host_config, target=target, http=http, data_path=host_config.workdir)

    def health() -> CheckResult:
        return check_health(ctx)

    if target.unit and has_systemd(host):
        return SystemdService(host, target.unit, health, clock)
    if target.unit_file:
        port = urlsplit(str(target.base_url)).port or 80
        return UnitJobService(host, str(target.unit_file), host_config.workdir, standin_job_id(port), health, clock)
    raise ServiceError(
        "eyas cannot control the production service: set target.unit (a host with systemd) or target.unit_file "
        "(a host without it, where eyas runs the unit's ExecStart itself) in the config."
    )
