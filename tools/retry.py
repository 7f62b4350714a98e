"""The one retry policy of the control plane: a call that may fail for a while (a busy agent LLM, a rate-limited search
engine, a host that stopped answering) is tried again by tenacity, every wait going through the caller's `sleep`.

The sleep is injected because each caller retries inside a recorded crossing on a live clock: a replay hands back the
crossing's final answer and never waits, and a test records the waits instead of sleeping them. The clients' own
retries stay off, so that a request is retried in one place, with one count. The workloads on the host cannot import
this (neither eyas nor tenacity is in the host's ML environment): theirs is `tools/workloads/try_again.py`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Waits that start at `first_s` and double after each failure, never longer than `cap_s`."""

    first_s: float
    cap_s: float = math.inf

    def wait_s(self, failures: int) -> float:
        return min(self.cap_s, self.first_s * 2 ** (failures - 1))


@dataclass(frozen=True)
class Failures:
    """The errors of one call so far, oldest first (never empty)."""

    errors: tuple[BaseException, ...]

    @property
    def tries(self) -> int:
        return len(self.errors)

    @property
    def last(self) -> BaseException:
        return self.errors[-1]


class GaveUp(Exception):
    """The policy stopped trying; the caller words what failed and what to do, from `failures`."""

    def __init__(self, failures: Failures) -> None:
        super().__init__(f"gave up after {failures.tries} tries (last: {failures.last})")
        self.failures = failures


def after_tries(tries: int) -> Callable[[Failures], bool]:
    """A `give_up` for a call that gets `tries` tries in all."""
    return lambda failures: failures.tries >= tries


def retry(
    call: Callable[[], T],
    *,
    on: tuple[type[BaseException], ...],
    wait_s: Callable[[Failures], float],
    give_up: Callable[[Failures], bool],
    sleep: Callable[[float], None],
    before_sleep: Callable[[Failures, float], None] | None = None,
) -> T:
    """`call()`, tried again while it raises one of `on`, waiting `wait_s(failures)` between tries, until
    `give_up(failures)` says stop: then GaveUp. Any other error goes straight through, untried again.
    `before_sleep(failures, wait)` hears of each retry before its wait (to tell a person why it is slow)."""
    # Imported here: `eyas status` reads patience.py's `stamp`, and needs no retry (tenacity takes ~70 ms).
    from tenacity import Retrying, retry_if_exception_type

    errors: list[BaseException] = []

    def attempt() -> T:
        try:
            return call()
        except on as error:
            errors.append(error)
            raise

    def failures(_: RetryCallState) -> Failures:
        return Failures(tuple(errors))

    def gave_up(_: RetryCallState) -> T:
        raise GaveUp(Failures(tuple(errors))) from errors[-1]

    def heard(state: RetryCallState) -> None:
        if before_sleep is not None and state.next_action is not None:
            before_sleep(Failures(tuple(errors)), state.next_action.sleep)

    retrying = Retrying(
        sleep=sleep,
        retry=retry_if_exception_type(on),
        wait=lambda state: wait_s(failures(state)),
        stop=lambda state: give_up(failures(state)),
        before_sleep=heard,
        retry_error_callback=gave_up,
    )
    return retrying(attempt)
