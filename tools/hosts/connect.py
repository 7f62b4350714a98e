"""Open the Host a config entry describes; an SSH address may be a host name from ~/.ssh/config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eyas.tools.errors import ConfigError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.local import LocalHost

if TYPE_CHECKING:  # a reader of runs opens a host only for a run with jobs, after loading its config
    from eyas.tools.hosts.ssh import SSHHost
    from eyas.tools.hosts.ssh_config import SshRoute
    from eyas.tools.settings.config import HostConfig

MAX_JUMPS = 8  # deeper than any real chain: a ProxyJump that leads back to itself would otherwise never end


def open_host(name: str, config: HostConfig, clock: Clock = SYSTEM_CLOCK) -> Host:
    if config.is_local:
        return LocalHost(name, clock=clock)
    from eyas.tools.hosts.ssh_config import resolve  # paramiko loads for SSH hosts, not at every eyas start-up

    # A port left at its default may come from the ssh config; one written in eyas's config wins.
    port = config.port if "port" in config.model_fields_set else None
    route = resolve(config.address, port=port, user=config.user, key_file=config.key_file)
    return _ssh_host(name, config, route, clock, depth=0)


def _ssh_host(name: str, config: HostConfig, route: SshRoute, clock: Clock, *, depth: int) -> SSHHost:
    """The SSHHost for one hop, holding the host it is reached through (the last ProxyJump entry, itself
    reached through the entries before it)."""
    from eyas.tools.hosts.ssh import SSHHost  # paramiko loads for SSH hosts, not at every eyas start-up
    from eyas.tools.hosts.ssh_config import parse_jump, resolve

    jump = None
    if route.jumps:
        if depth == MAX_JUMPS:
            raise ConfigError(
                f"Reaching host '{name}' takes more than {MAX_JUMPS} ProxyJump hops; check ~/.ssh/config."
            )
        *earlier, last = route.jumps
        user, address, port = parse_jump(last)
        hop = resolve(address, port=port, user=user, proxy_jump=",".join(earlier) or None)
        jump = _ssh_host(f"{name} via {address}", config, hop, clock, depth=depth + 1)
    return SSHHost(
        name,
        route.hostname,
        port=route.port,
        user=route.user,
        key_file=route.key_file,
        key_passphrase_env=config.key_passphrase_env,
        known_hosts=config.known_hosts,
        keepalive_s=config.keepalive_s,
        jump=jump,
        clock=clock,
    )
