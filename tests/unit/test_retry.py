"""The one retry policy (tools/retry.py) and the host outage's patience built on it: which errors are tried again,
when the policy gives up, and the waits it asks for, recorded by a virtual clock instead of slept through. And the
workloads' own tries (tools/workloads/try_again.py), which run on the host without eyas or tenacity."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest

from eyas.tools.errors import AuthFailed, CommandTimeout, HostUnreachable
from eyas.tools.hosts.patience import patiently, stamp
from eyas.tools.retry import Backoff, GaveUp, after_tries, retry
from virtual_clock import EPOCH_AT_START, VirtualClock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))
from generate import retryable
from try_again import Tries


class Flaky:
    """A call that raises the given errors in turn, then answers."""

    def __init__(self, *errors: BaseException, answer: str = "answer") -> None:
        self.errors = list(errors)
        self.answer = answer
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.answer


def doubling(first_s: float, cap_s: float) -> Callable[..., float]:
    backoff = Backoff(first_s, cap_s)
    return lambda failures: backoff.wait_s(failures.tries)


def test_the_errors_it_is_given_are_tried_again_with_the_waits_it_asks_for() -> None:
    clock, heard = VirtualClock(), []
    call = Flaky(ValueError("one"), ValueError("two"), ValueError("three"))
    answer = retry(
        call, on=(ValueError,), wait_s=doubling(1.0, 3.0), give_up=after_tries(5), sleep=clock.sleep,
        before_sleep=lambda failures, wait: heard.append((failures.tries, str(failures.last), wait)),
    )  # fmt: skip
    assert answer == "answer" and call.calls == 4
    assert clock.sleeps == [1.0, 2.0, 3.0]  # doubling, capped
    assert heard == [(1, "one", 1.0), (2, "two", 2.0), (3, "three", 3.0)]


def test_it_gives_up_with_every_error_and_does_not_wait_after_the_last_try() -> None:
    clock = VirtualClock()
    call = Flaky(*(ValueError(f"no {n}") for n in range(5)))
    with pytest.raises(GaveUp) as raised:
        retry(call, on=(ValueError,), wait_s=doubling(1.0, 60.0), give_up=after_tries(3), sleep=clock.sleep)
    assert [str(error) for error in raised.value.failures.errors] == ["no 0", "no 1", "no 2"]
    assert str(raised.value.failures.last) == "no 2" and call.calls == 3 and clock.sleeps == [1.0, 2.0]


def test_any_other_error_goes_straight_through_untried_again() -> None:
    clock = VirtualClock()
    call = Flaky(ValueError("busy"), KeyError("a bug"))
    with pytest.raises(KeyError, match="a bug"):
        retry(call, on=(ValueError,), wait_s=doubling(1.0, 60.0), give_up=after_tries(5), sleep=clock.sleep)
    assert call.calls == 2 and clock.sleeps == [1.0]


def patient(call: Callable[[], str], clock: VirtualClock, heard: list[tuple[float | None, float]]) -> str:
    return patiently(
        call, backoff=Backoff(first_s=0.05, cap_s=2.0), give_up_s=5.0, clock=clock, host="gpu",
        on_outage=lambda since, wait: heard.append((since, wait)), after="Resume it later.",
    )  # fmt: skip


def test_a_host_outage_is_waited_out_and_its_end_is_told() -> None:
    clock, heard = VirtualClock(), []
    call = Flaky(HostUnreachable("no route"), CommandTimeout("stalled"), HostUnreachable("no route"))
    assert patient(call, clock, heard) == "answer"
    assert clock.sleeps == [0.1, 0.2, 0.4]  # never faster than 0.1 s, then doubling
    assert heard == [(EPOCH_AT_START, 0.1), (EPOCH_AT_START, 0.2), (EPOCH_AT_START, 0.4), (None, 0.0)]


def test_a_host_unreachable_past_the_bound_is_given_up_with_when_it_began_and_what_next() -> None:
    clock, heard = VirtualClock(), []
    call = Flaky(*(HostUnreachable(f"no route {n}") for n in range(20)))
    with pytest.raises(HostUnreachable) as raised:
        patient(call, clock, heard)
    message = str(raised.value)
    assert f"unreachable since {stamp(EPOCH_AT_START)}" in message and "Resume it later." in message
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0]  # capped at 2 s; 5.1 s after the first failure it stops
    assert f"no route {len(clock.sleeps)}" in message and heard[-1] != (None, 0.0)


def test_a_refused_login_is_not_an_outage_and_is_not_waited_out() -> None:
    clock, heard = VirtualClock(), []
    with pytest.raises(AuthFailed):
        patient(Flaky(AuthFailed("wrong key")), clock, heard)
    assert clock.sleeps == [] and heard == []


def http_error(status: int) -> openai.APIStatusError:
    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1:8000/v1/chat/completions"))
    return openai.APIStatusError(f"HTTP {status}", response=response, body=None)


def test_a_workload_tries_what_a_healthy_server_could_answer_and_backs_off_within_the_cap() -> None:
    """generate.py's rule through the shared tries: 5xx, 429, timeouts and malformed answers again, a 400 never."""
    tries = Tries(4, retryable)
    assert tries.again(http_error(503)) and tries.again(http_error(429)) and tries.again(TimeoutError())
    assert not tries.again(http_error(503))  # the fourth failure of four tries: given up
    assert not Tries(4, retryable).again(http_error(400))
    waits = Tries(99)
    for failures in range(1, 9):
        assert waits.again(OSError("reset"))
        bound = min(10.0, 1.0 * 2 ** (failures - 1))
        assert all(0 <= waits.backoff_s(first_s=1.0, cap_s=10.0) <= bound for _ in range(50))
