"""Where `ssh NAME` would go: address, port, user, key and jump host from ~/.ssh/config, so that a host usable
with plain ssh works as `address = "NAME"`. Host key checking is never taken from it: eyas stays strict."""

from __future__ import annotations

from pathlib import Path

import paramiko
from pydantic import BaseModel

from eyas.tools.errors import ConfigError

SSH_CONFIG = "~/.ssh/config"
SSH_PORT = 22


class SshRoute(BaseModel):
    """One hop as ssh would dial it."""

    alias: str
    hostname: str
    port: int
    user: str | None
    key_file: str | None
    proxy_jump: str | None

    @property
    def jumps(self) -> list[str]:
        """The jump hosts in dialling order, each as `[user@]host[:port]`."""
        return [hop.strip() for hop in (self.proxy_jump or "").split(",") if hop.strip()]


def resolve(
    alias: str,
    *,
    port: int | None = None,
    user: str | None = None,
    key_file: str | None = None,
    proxy_jump: str | None = None,
    config_path: str = SSH_CONFIG,
) -> SshRoute:
    """The route to `alias`. What eyas's config sets wins, as options on ssh's command line do; the rest
    comes from the ssh config (the first IdentityFile that exists), then ssh's defaults."""
    path = Path(config_path).expanduser()
    try:
        found = paramiko.SSHConfig.from_path(str(path)).lookup(alias) if path.is_file() else {}
    except (paramiko.ssh_exception.ConfigParseError, OSError, ValueError) as exc:
        raise ConfigError(
            f"The ssh config {path} cannot be read ({exc}); fix it, or check it with `ssh -G {alias}`."
        ) from None
    try:
        port = port or int(found.get("port", SSH_PORT))
    except ValueError:
        raise ConfigError(
            f"The ssh config {path} gives host {alias} the port {found['port']!r}, not a number."
        ) from None
    identities = [name for name in found.get("identityfile", []) if Path(name).expanduser().is_file()]
    jump = proxy_jump or found.get("proxyjump")
    return SshRoute(
        alias=alias,
        hostname=found.get("hostname", alias),
        port=port,
        user=user or found.get("user"),
        key_file=key_file or (identities[0] if identities else None),
        proxy_jump=None if jump is None or jump.lower() == "none" else jump,
    )


def parse_jump(hop: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (ProxyJump's form) as (user, host, port)."""
    user, _, rest = hop.rpartition("@")
    host, _, port = rest.partition(":")
    if port and not port.isdigit():
        raise ConfigError(f"The ProxyJump entry {hop!r} has a port that is not a number; write it as user@host:22.")
    return user or None, host, int(port) if port else None
