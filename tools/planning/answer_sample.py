"""How long the served model's answers really are: a short sample of the run's own prompts, answered at its max_tokens.

Before any data exists the only bound on an answer is max_tokens, and planning every answer at it turns a ten-hour
generation and a 3 TB hidden-state set into a worst case shown as the estimate: most answers stop well before the
cap. So the plan asks the served model the run's first prompts (as many as the run sends at once, at most
ANSWER_SAMPLE), exactly as generation will (the server's own sampling, max_tokens), and plans on what came back:

- hours on the sample's mean answer (the total over thousands of samples is their count times the mean);
- bytes, which decide whether the disk holds the run, on a stated high percentile of that mean: the 95th percentile
  of the mean over bootstrap resamples of the sample, plus DISK_MARGIN, never above max_tokens;
- the worst case (every answer at max_tokens) beside both, so the operator sees the bound too.

A sample of several questions (a ShareGPT conversation has 3.6 on average) is answered one question at a time, each
request carrying the earlier answers, until the next question and an answer of max_tokens would pass max_seq_len
(generate.py's rule): the plan counts the requests and tokens that rule gives over the same samples
(`shaped`), with the sampled answer length for every answer.

After generation the plan is made again from the generated file's own averages (estimate.TokenStats), which replace
the sample.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.planning.answer_lengths import AnswerLengths, answer_lengths
from eyas.tools.planning.prompt_count import Conversation, joined
from eyas.tools.recording.task_scope import submit_in_task
from eyas.tools.settings.config import TargetConfig
from eyas.tools.settings.sizes import CHARS_PER_TOKEN

ANSWER_SAMPLE = 32  # prompts answered at most: enough for the mean within about a tenth on typical chat answers


def first_request(turns: Conversation) -> list[dict[str, str]]:
    """A sample's first request as generate.py sends it: the system turns before its first question, and that."""
    messages = []
    for turn in turns:
        messages.append({"role": "user" if turn["from"] == "human" else "system", "content": turn["value"]})
        if turn["from"] == "human":
            break
    return messages


def questions_asked(
    turns: Conversation, tokens: Callable[[str], float], answer: float, max_tokens: int, max_seq_len: int
) -> tuple[int, float]:
    """generate.py's rule over one sample: each human turn is asked while the conversation so far, the question and
    an answer of max_tokens fit max_seq_len (the first always); the questions asked and the sample's tokens."""
    sequence, asked = 0.0, 0
    for turn in turns:
        length = tokens(turn["value"])
        if turn["from"] != "human":
            sequence += length
            continue
        if asked and sequence + length + max_tokens > max_seq_len:
            break
        sequence += length + answer
        asked += 1
    return max(asked, 1), sequence


def shaped(
    answers: AnswerLengths, samples: list[Conversation], prompt_tokens: float, max_seq_len: int
) -> AnswerLengths:
    """The sample of answers applied to the samples' own turns: requests and tokens per sample, at the mean answer and
    at the disk's. Turn lengths are estimated at CHARS_PER_TOKEN, scaled so the samples' prompts average
    `prompt_tokens` (what the server tokenized)."""
    if not samples:
        return answers
    estimated = sum(len(joined(turns)) for turns in samples) / len(samples) / CHARS_PER_TOKEN
    scale = prompt_tokens / estimated if estimated and prompt_tokens else 1.0

    def tokens(text: str) -> float:
        return len(text) / CHARS_PER_TOKEN * scale

    def over_samples(answer: float) -> tuple[float, float]:
        asked = [questions_asked(turns, tokens, answer, answers.max_tokens, max_seq_len) for turns in samples]
        return sum(count for count, _ in asked) / len(asked), sum(sequence for _, sequence in asked) / len(asked)

    (requests, sequence), (_, disk), (worst_requests, worst) = (
        over_samples(answers.mean_tokens),
        over_samples(answers.high_tokens),
        over_samples(answers.max_tokens),
    )
    return answers.model_copy(update={
        "requests_per_sample": requests, "sequence_tokens": sequence, "disk_sequence_tokens": disk,
        "worst_requests_per_sample": worst_requests, "worst_sequence_tokens": worst,
    })  # fmt: skip


def sample_answers(
    http: HttpClient,
    target: TargetConfig,
    samples: list[Conversation],
    *,
    max_tokens: int,
    concurrency: int,
    headers: dict[str, str] | None = None,
) -> AnswerLengths | None:
    """Ask the served model the first question of the first samples (as many as `concurrency`, at most
    ANSWER_SAMPLE), all at once, each at `max_tokens` with the server's own sampling, as generate.py asks them; None
    when none was answered (the plan then keeps max_tokens, and says so)."""
    chosen = [first_request(turns) for turns in samples[: max(1, min(ANSWER_SAMPLE, concurrency))]]
    url = f"{target.base_url}/v1/chat/completions"

    def one(messages: list[dict[str, str]]) -> int | None:
        body = {"model": target.model, "messages": messages, "max_tokens": max_tokens}
        try:
            response = http.post_json(url, body, headers=headers, timeout=max(120.0, max_tokens * 2.0))
            return int(response.json()["usage"]["completion_tokens"]) if response.status == 200 else None
        except (HttpError, ValueError, KeyError, TypeError):
            return None

    with ThreadPoolExecutor(max_workers=len(chosen) or 1, thread_name_prefix="answers") as pool:
        # One task per request, so a replay matches each to its own recorded answer whatever the order.
        futures = [submit_in_task(pool, f"answer-{i}", one, prompt) for i, prompt in enumerate(chosen)]
        lengths = [length for future in futures if (length := future.result()) is not None]
    return answer_lengths(lengths, max_tokens, len(chosen))
