"""What a generated file measures: its samples' average lengths, which replace the max_tokens bound in the plan."""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, Field


class TokenStats(BaseModel):
    """What a generated file measures: the averages replace the max_tokens bound."""

    samples: int = Field(gt=0)
    avg_sequence_tokens: float = Field(gt=0)
    avg_completion_tokens: float = Field(ge=0)
    avg_line_bytes: float = Field(gt=0)
    avg_requests: float = Field(1.0, ge=1, description="answers per sample (multi-turn samples have several)")


def token_stats(lines: Iterable[str]) -> TokenStats | None:
    """Averages over the lines of a generate.py output (a sample of them is enough); None when empty."""
    count = sequence = completion = size = requests = 0
    for line in lines:
        if not line.strip():
            continue
        usage = json.loads(line).get("usage") or {}
        count += 1
        sequence += usage.get("sequence_tokens") or usage.get("total_tokens", 0)
        completion += usage.get("completion_tokens", 0)
        requests += usage.get("requests", 1)
        size += len(line.encode()) + 1
    if count == 0 or sequence == 0:
        return None
    return TokenStats(
        samples=count,
        avg_sequence_tokens=sequence / count,
        avg_completion_tokens=completion / count,
        avg_line_bytes=size / count,
        avg_requests=requests / count,
    )
