"""The served model's sampled answers as the plan counts them: their mean, the high figure the disk is planned at,
and the tokens a sample comes to (answer_sample.py asks the model; the estimate reads these figures without its
HTTP client)."""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

from eyas.tools.planning.token_stats import TokenStats

DISK_MARGIN = 0.10  # on top of the mean's high percentile, for the disk decision
PERCENTILE = 0.95
RESAMPLES = 1000


class AnswerLengths(BaseModel):
    """The sample's answers, in completion tokens."""

    answers: int = Field(gt=0)
    mean_tokens: float = Field(ge=0)
    high_tokens: float = Field(ge=0, description="what the disk is planned at: the mean's 95th percentile + margin")
    capped: int = Field(ge=0, description="answers that reached max_tokens")
    max_tokens: int = Field(gt=0)
    concurrency: int = Field(gt=0)
    requests_per_sample: float = Field(1.0, ge=1, description="questions generate.py asks a sample, on average")
    sequence_tokens: float | None = Field(None, gt=0, description="a sample's tokens, prompts and answers")
    disk_sequence_tokens: float | None = Field(None, gt=0, description="the same with the disk's answer length")
    worst_requests_per_sample: float | None = Field(None, ge=1, description="questions asked, every answer at the cap")
    worst_sequence_tokens: float | None = Field(None, gt=0, description="a sample's tokens, every answer at the cap")

    def worst(self) -> AnswerLengths:
        """The same samples with every answer at max_tokens: the worst case the plan shows beside its figures."""
        cap = float(self.max_tokens)
        return self.model_copy(update={
            "mean_tokens": cap, "high_tokens": cap, "requests_per_sample": self.worst_requests_per_sample or 1.0,
            "sequence_tokens": self.worst_sequence_tokens, "disk_sequence_tokens": self.worst_sequence_tokens,
        })  # fmt: skip

    def text(self) -> str:
        """The sample in words, as the plan's sources and verdict cite it."""
        return (
            f"{self.answers} prompts of the run's source answered by the served model at max_tokens "
            f"{self.max_tokens:,} ({self.concurrency} at once): {self.mean_tokens:,.0f} tokens on average, "
            f"{self.capped} reached the cap; the disk is planned at {self.high_tokens:,.0f} (the mean's "
            f"{PERCENTILE:.0%} percentile over resamples, plus {DISK_MARGIN:.0%}); {self.requests_per_sample:.2f} "
            "questions asked a sample (every human turn that fits max_seq_len)"
        )


def high_mean(lengths: list[int], cap: int, seed: int = 0) -> float:
    """The 95th percentile of the mean over bootstrap resamples, plus the margin, at most `cap`."""
    rng = random.Random(seed)  # fixed: the same sample plans the same bytes (replays match)
    n = len(lengths)
    means = sorted(sum(rng.choices(lengths, k=n)) / n for _ in range(RESAMPLES))
    high = means[min(RESAMPLES - 1, int(PERCENTILE * RESAMPLES))]
    return min(float(cap), high * (1 + DISK_MARGIN))


def answer_lengths(lengths: list[int], max_tokens: int, concurrency: int) -> AnswerLengths | None:
    """The sample's figures; None when nothing came back."""
    if not lengths:
        return None
    return AnswerLengths(
        answers=len(lengths),
        mean_tokens=sum(lengths) / len(lengths),
        high_tokens=high_mean(lengths, max_tokens),
        capped=sum(1 for length in lengths if length >= max_tokens),
        max_tokens=max_tokens,
        concurrency=concurrency,
    )


def expected_sequence_tokens(
    measured: TokenStats | None, prompt_tokens: float, max_tokens: int, answers: AnswerLengths | None
) -> float:
    """Tokens per sample: the generated file's average, else every question a sample asks at the sampled mean answer
    (answer_sample.shaped), else the average prompt plus max_tokens (the worst case of one answer)."""
    if measured:
        return measured.avg_sequence_tokens
    if answers and answers.sequence_tokens:
        return answers.sequence_tokens
    return prompt_tokens + (answers.mean_tokens if answers else max_tokens)
