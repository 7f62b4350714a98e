"""k per batch size: where the tournament's winner is the same method at concurrency 1 and at the run's concurrency
but its best k differs, production can draft the one k when few requests are in flight and the other when many are,
through vLLM's `num_speculative_tokens_per_batch_size` (a list of inclusive batch-size ranges and their k; the last
range's k carries on to larger batches, and no k exceeds `num_speculative_tokens`).

Only two concurrencies are measured, so the switch sits at their geometric middle (for 1 and 200, after 14 requests):
the schedule claims no more than the two measurements say. Pure functions: no server, no file."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

# The feature's name in vLLM's SpeculativeConfig (vllm/config/speculative.py; present in vLLM 0.32).
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


class KSchedule(BaseModel):
    """The k for few requests in flight and the k for many, and where production switches."""

    model_config = ConfigDict(frozen=True)

    k_few: int  # the winner's best k at concurrency 1
    k_many: int  # at the run's concurrency
    switch_after: int  # the largest batch drafted with k_few
    run_concurrency: int

    def ranges(self) -> list[list[int]]:
        """vLLM's inclusive (first batch size, last batch size, k) ranges."""
        return [[1, self.switch_after, self.k_few], [self.switch_after + 1, self.run_concurrency, self.k_many]]

    def applied(self, speculative: dict[str, Any]) -> dict[str, Any]:
        """`speculative` (one method's --speculative-config) drafting per batch size: its k the larger of the two."""
        return {**speculative, "num_speculative_tokens": max(self.k_few, self.k_many), SCHEDULE_KEY: self.ranges()}

    def text(self) -> str:
        return (
            f"k={self.k_few} with up to {self.switch_after} request(s) in flight, k={self.k_many} above (the best k "
            f"measured at concurrency 1 and at {self.run_concurrency}; the switch at their geometric middle)"
        )


def k_schedule(k_few: int, k_many: int, run_concurrency: int) -> KSchedule | None:
    """The schedule where the two best k differ; None where one k is best at both (nothing to vary)."""
    if k_few == k_many or run_concurrency < 2:
        return None
    switch_after = max(1, min(run_concurrency - 1, math.isqrt(run_concurrency)))
    return KSchedule(k_few=k_few, k_many=k_many, switch_after=switch_after, run_concurrency=run_concurrency)
