"""The plan's sample of answers: the mean and the disk's high figure from the answers that came back, and what
generate.py's rule makes of a sample's several questions (each asked while the conversation, the question and an
answer of max_tokens fit max_seq_len), so a multi-turn source is planned at its real requests and tokens."""

from __future__ import annotations

import pytest

from eyas.tools.planning.answer_lengths import DISK_MARGIN, answer_lengths
from eyas.tools.planning.answer_sample import questions_asked, shaped
from eyas.tools.planning.estimate import PlanInputs, estimate
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.settings.sizes import CHARS_PER_TOKEN


def words(tokens: int) -> str:
    return "x" * (tokens * CHARS_PER_TOKEN)


def test_the_disk_is_planned_above_the_mean_and_never_above_max_tokens() -> None:
    lengths = [100, 120, 900, 80, 1024, 60, 300, 1024]
    sample = answer_lengths(lengths, max_tokens=1024, concurrency=8)
    assert sample is not None and sample.mean_tokens == pytest.approx(sum(lengths) / 8)
    assert sample.mean_tokens * (1 + DISK_MARGIN) < sample.high_tokens <= 1024 and sample.capped == 2
    assert answer_lengths([1024] * 4, max_tokens=1024, concurrency=4).high_tokens == 1024  # type: ignore[union-attr]
    assert answer_lengths([], max_tokens=1024, concurrency=4) is None


def test_every_question_that_fits_is_asked_and_the_first_always() -> None:
    def tokens(text: str) -> float:
        return len(text) / CHARS_PER_TOKEN

    turns = [{"from": "system", "value": words(10)}] + [{"from": "human", "value": words(50)} for _ in range(4)]
    # 10 + (50 + 100) per question; the next question is asked while what is there, it and 200 fit 512.
    assert questions_asked(turns, tokens, 100, max_tokens=200, max_seq_len=512) == (2, 310)
    assert questions_asked(turns, tokens, 100, max_tokens=200, max_seq_len=10_000) == (4, 610)
    assert questions_asked(turns[:2], tokens, 400, max_tokens=900, max_seq_len=512) == (1, 460)


def test_a_multi_turn_source_is_planned_at_its_requests_and_tokens() -> None:
    conversations = [[{"from": "human", "value": words(40)} for _ in range(3)], [{"from": "human", "value": words(40)}]]
    sample = answer_lengths([100, 140], max_tokens=512, concurrency=2)
    assert sample is not None
    shape = shaped(sample, conversations, prompt_tokens=80.0, max_seq_len=4096)  # the server counts 80, not 40x4/2
    assert shape.requests_per_sample == 2.0  # three questions and one
    # Four questions of 40 tokens (as estimated, scaled to the server's count) and four answers of 120, over two.
    scale = 80.0 / ((3 * 40 * CHARS_PER_TOKEN + 4 + 40 * CHARS_PER_TOKEN) / 2 / CHARS_PER_TOKEN)
    assert shape.sequence_tokens == pytest.approx((4 * 40 * scale + 4 * 120) / 2)
    inputs = PlanInputs(
        model=ModelDims(hidden_size=576, num_layers=30, vocab_size=49152), samples=100, max_tokens=512,
        prompt_tokens=80.0, answers=shape, generation_tok_s=100.0, free_disk_bytes=10**12,
    )  # fmt: skip
    plan = estimate(inputs)
    assert plan.tokens_from == "sampled" and plan.tokens_per_sample == pytest.approx(shape.sequence_tokens)
    # Two answers of 120 a sample, not one of 512: generation and bytes follow.
    assert plan.generation_hours == pytest.approx(100 * 2 * 120 / 100 / 3600)
    # The worst case asks the same questions with every answer at max_tokens (all fit 4,096 here).
    assert shape.worst_requests_per_sample == 2.0
    assert plan.worst_case is not None and plan.worst_case.generation_hours == pytest.approx(100 * 2 * 512 / 100 / 3600)
