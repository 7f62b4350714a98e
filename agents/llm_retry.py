"""When the agent LLM is asked again: a server that is down, overloaded (429, 5xx) or too slow gets a few more tries,
a request that keeps timing out fewer, each wait doubling up to a cap or as long as the server's Retry-After asks.
The tries themselves run by `tools/retry.py`'s policy, in `llm.py`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from eyas.tools.retry import Backoff, Failures


class RetryPolicy(BaseModel):
    attempts: int = Field(5, ge=1, description="tries of one request, the first included")
    # A server that used a whole deadline once (overloaded, or trickling its answer) rarely does better at once:
    # five tries of 180 s kept `eyas chat` silent for 15 minutes. A timeout is tried once more, then reported.
    timeout_attempts: int = Field(2, ge=1, description="tries of one request that keeps timing out")
    base_s: float = Field(0.5, ge=0, description="wait before the second try; doubles each time")
    cap_s: float = Field(8.0, ge=0, description="longest single wait (also bounds a server's Retry-After)")

    def wait_s(self, failures: Failures) -> float:
        """The backoff, or the server's own Retry-After when it sent one; never past the cap."""
        asked = failures.last.retry_after if isinstance(failures.last, Busy) else None
        return min(self.cap_s, asked) if asked is not None else Backoff(self.base_s, self.cap_s).wait_s(failures.tries)

    def gives_up(self, failures: Failures) -> bool:
        return failures.tries >= self.attempts or _timeouts(failures) >= self.timeout_attempts

    def most(self, failures: Failures) -> int:
        """The tries this request can have, as far as is known after `failures`: fewer while it keeps timing out."""
        if not (isinstance(failures.last, Busy) and failures.last.timed_out):
            return self.attempts
        return min(self.attempts, failures.tries + self.timeout_attempts - _timeouts(failures))


class Busy(Exception):
    """One try found the server down, overloaded or too slow: worth another."""

    def __init__(self, reason: str, *, retry_after: float | None = None, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.timed_out = timed_out


def _timeouts(failures: Failures) -> int:
    return sum(isinstance(error, Busy) and error.timed_out for error in failures.errors)
