"""Waiting out a host that stopped answering: a lasting SSH outage (a reboot of the network path, a VPN that
dropped) must not end supervision of jobs that keep running there. Read-only calls are tried again with capped
exponential backoff (`tools/retry.py`'s policy) until the host answers or a generous bound has passed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from eyas.tools.errors import CommandTimeout, HostUnreachable
from eyas.tools.hosts.clock import Clock
from eyas.tools.retry import Backoff, Failures, GaveUp, retry

T = TypeVar("T")

# What an outage looks like to a caller: no connection, or a connection that stopped answering mid-command.
# A wrong host key or a refused login is not an outage; waiting would not fix it.
OUTAGE_ERRORS = (HostUnreachable, CommandTimeout)

# Told of an outage: (seconds since the epoch it began, or None when the host answers again; the next wait).
OnOutage = Callable[[float | None, float], None]

SHORTEST_WAIT_S = 0.1  # however short the poll interval, an unreachable host is not asked in a busy loop


@dataclass
class _Outage:
    since: float  # seconds since the epoch, for the person reading
    began: float  # on the monotonic clock, for the bound


def stamp(epoch_s: float) -> str:
    """A time a person reads in a message or in `eyas status`."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_s))


def patiently(
    call: Callable[[], T],
    *,
    backoff: Backoff,
    give_up_s: float,
    clock: Clock,
    host: str,
    on_outage: OnOutage,
    after: str,
) -> T:
    """`call()`, tried again while `host` is unreachable, until it has been for `give_up_s`. Only for calls that are
    safe to repeat (reads). The waits go through `clock`, so a replay reproduces them. `after` says what happens
    when eyas gives up."""
    waits = Backoff(max(backoff.first_s, SHORTEST_WAIT_S), backoff.cap_s)
    outage: _Outage | None = None

    def long_enough(failures: Failures) -> bool:
        return outage is not None and clock.monotonic() - outage.began >= give_up_s

    def waiting(failures: Failures, wait: float) -> None:
        nonlocal outage
        if outage is None:
            outage = _Outage(since=clock.now(), began=clock.monotonic())
        on_outage(outage.since, wait)

    try:
        result = retry(
            call, on=OUTAGE_ERRORS, wait_s=lambda failures: waits.wait_s(failures.tries), give_up=long_enough,
            sleep=clock.sleep, before_sleep=waiting,
        )  # fmt: skip
    except GaveUp as out:
        assert outage is not None  # the first failure always waits, and starts the outage
        raise HostUnreachable(
            f"Host '{host}' has been unreachable since {stamp(outage.since)}, longer than the "
            f"{give_up_s / 3600:g} h eyas waits for it (the policy's host_outage_hours); the last "
            f"error: {out.failures.last} {after}"
        ) from None
    if outage is not None:
        on_outage(None, 0.0)
    return result
