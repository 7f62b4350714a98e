"""Open the Host a config entry describes."""

from __future__ import annotations

from eyas.tools.config import HostConfig
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.local import LocalHost
from eyas.tools.hosts.ssh import SSHHost


def open_host(name: str, config: HostConfig, clock: Clock = SYSTEM_CLOCK) -> Host:
    if config.is_local:
        return LocalHost(name, clock=clock)
    return SSHHost(
        name,
        config.address,
        port=config.port,
        user=config.user,
        key_file=config.key_file,
        known_hosts=config.known_hosts,
        clock=clock,
    )
