"""Waiting out a host that stopped answering: a lasting SSH outage (a reboot of the network path, a VPN that
dropped) must not end supervision of jobs that keep running there. Read-only calls are tried again with capped
exponential backoff until the host answers or a generous bound has passed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from eyas.tools.errors import CommandTimeout, HostUnreachable
from eyas.tools.hosts.clock import Clock

T = TypeVar("T")

# What an outage looks like to a caller: no connection, or a connection that stopped answering mid-command.
# A wrong host key or a refused login is not an outage; waiting would not fix it.
OUTAGE_ERRORS = (HostUnreachable, CommandTimeout)

# Told of an outage: (seconds since the epoch it began, or None when the host answers again; the next wait).
OnOutage = Callable[[float | None, float], None]


@dataclass(frozen=True)
class Backoff:
    """The waits between tries: `first_s`, doubled after each failure up to `cap_s`; the caller gives up once
    the host has been unreachable for `give_up_s`."""

    first_s: float
    cap_s: float
    give_up_s: float

    def next_wait(self, wait: float) -> float:
        return min(wait * 2, self.cap_s)


def stamp(epoch_s: float) -> str:
    """A time a person reads in a message or in `eyas status`."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))


def patiently(
    call: Callable[[], T], *, backoff: Backoff, clock: Clock, host: str, on_outage: OnOutage, after: str
) -> T:
    """`call()`, tried again while `host` is unreachable. Only for calls that are safe to repeat (reads). The
    waits go through `clock`, so a replay reproduces them. `after` says what happens when eyas gives up."""
    since: float | None = None
    began = 0.0
    wait = max(backoff.first_s, 0.1)
    while True:
        try:
            result = call()
        except OUTAGE_ERRORS as exc:
            if since is None:
                since, began = clock.now(), clock.monotonic()
            elif clock.monotonic() - began >= backoff.give_up_s:
                raise HostUnreachable(
                    f"Host '{host}' has been unreachable since {stamp(since)}, longer than the "
                    f"{backoff.give_up_s / 3600:g} h eyas waits for it (the policy's host_outage_hours); the last "
                    f"error: {exc} {after}"
                ) from None
            on_outage(since, wait)
            clock.sleep(wait)
            wait = backoff.next_wait(wait)
            continue
        if since is not None:
            on_outage(None, 0.0)
        return result
