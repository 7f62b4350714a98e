"""Bootstrap confidence intervals over prompts.

The held-out prompts are the sample: an interval says how far a result would likely move on other prompts of
the same kind. Percentile bootstrap with a fixed seed, so the same measurements give the same result file.
Statistics here are ratios of sums (accepted over drafts, tokens over seconds), so each resample recomputes
the ratio from the resampled prompts' sums rather than averaging per-prompt ratios, which would overweight
short answers. Plain Python: workloads import it by its plain name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

RESAMPLES = 2000
LEVEL = 0.95

Statistic = Callable[[Sequence[int]], float | None]  # prompt indices (with repeats) -> value, None if undefined


def ratio_of_sums(numerators: Sequence[float], denominators: Sequence[float], offset: float = 0.0) -> Statistic:
    """offset + sum(numerators) / sum(denominators) over the chosen prompts."""

    def statistic(indices: Sequence[int]) -> float | None:
        below = sum(denominators[i] for i in indices)
        return offset + sum(numerators[i] for i in indices) / below if below else None

    return statistic


def paired_ratio(faster: Statistic, slower: Statistic) -> Statistic:
    """One statistic over another on the same chosen prompts (a speedup: each prompt's two runs stay paired)."""

    def statistic(indices: Sequence[int]) -> float | None:
        above, below = faster(indices), slower(indices)
        return above / below if above is not None and below else None

    return statistic


def bootstrap(
    count: int, statistic: Statistic, *, resamples: int = RESAMPLES, level: float = LEVEL
) -> list[float] | None:
    """[low, high] of the statistic over `resamples` resamples of `count` prompts; None when it is never defined."""
    if count == 0:
        return None
    rng = random.Random(0)
    values = []
    for _ in range(resamples):
        value = statistic([rng.randrange(count) for _ in range(count)])
        if value is not None:
            values.append(value)
    if not values:
        return None
    values.sort()
    tail = (1 - level) / 2
    return [values[round(tail * (len(values) - 1))], values[round((1 - tail) * (len(values) - 1))]]
