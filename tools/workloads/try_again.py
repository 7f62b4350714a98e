"""How a workload tries a request again: a count of tries with the rule for which errors deserve another, and the
jittered, capped backoff between them. The control plane's policy (eyas's tools/retry.py, on tenacity) cannot run
here: the host's ML environment has neither eyas nor, necessarily, tenacity, so the workloads share this instead.
The caller does the waiting (asyncio.sleep in generate.py, a server restart in online_fetch.py)."""

from __future__ import annotations

import random
from collections.abc import Callable


class Tries:
    """The tries of one request, at most `limit` (the first included); `retryable` says which errors deserve
    another (by default every error the caller catches)."""

    def __init__(self, limit: int, retryable: Callable[[BaseException], bool] = lambda error: True) -> None:
        self.limit = limit
        self.retryable = retryable
        self.failures = 0

    def again(self, error: BaseException) -> bool:
        """After a failure: True to try once more, False to give the error up to the caller."""
        self.failures += 1
        return self.failures < self.limit and self.retryable(error)

    def backoff_s(self, first_s: float, cap_s: float) -> float:
        """The wait before the next try: random up to `first_s` doubled after each failure, never past `cap_s`
        (the jitter keeps many requests that failed at once from all returning at once)."""
        return random.uniform(0, min(cap_s, first_s * 2 ** (self.failures - 1)))
