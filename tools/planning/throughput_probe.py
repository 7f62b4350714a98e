"""A short burst of real completions against the served model: decoding with every request in flight, one request
alone (as the evaluation sends them), and a wave of long prompts answered with one token each (extraction's
prefill)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.planning.model_config import MeasureError
from eyas.tools.planning.prompt_count import PROMPT_SAMPLE, probe_prompts
from eyas.tools.recording.task_scope import submit_in_task
from eyas.tools.settings.config import TargetConfig
from eyas.tools.settings.sizes import (
    CHARS_PER_TOKEN,
)

# Prompt tokens of each request of the prefill probe (at most half the served context): long enough that the forward
# pass, not the request's handling, takes the time, as in extraction's samples of thousands of tokens.
PREFILL_PROBE_TOKENS = 1024


# Requests of the prefill probe, at most (fewer at a lower --probe-concurrency): 8 of 1,024 tokens fill a scheduler
# step of the 8,192 tokens vLLM batches by default, and on a CPU target take about 4 s.
PREFILL_PROBE_REQUESTS = 8

# Above this share of the long wave, a fitted per-wave overhead is not the requests' handling but a change of load
# between the waves.
IMPLAUSIBLE_OVERHEAD = 0.5


class Throughput(BaseModel):
    tokens_per_s: float  # decoding, all requests in flight together
    overhead_s: float  # per request beyond decoding (prefill, scheduling), amortized over the concurrency
    single_tok_s: float | None = None  # one request alone, as the evaluation sends them (prefill included)
    prefill_tok_s: float | None = None  # prompt tokens/s of a wave of long prompts answered with one token each
    prefill_tokens: int = 0  # the prompt tokens of that wave, as the server counted them
    prefill_requests: int = 0
    requests: int
    completion_tokens: int
    wall_s: float
    concurrency: int


def prefill_prompts(count: int, tokens: int, nonce: str) -> list[str]:
    """`count` prompts of at most about `tokens` tokens (CHARS_PER_TOKEN characters a token, which overcounts English),
    each opening with its own nonce, so no prefix of one is in the server's cache from another or an earlier plan."""
    text = " ".join(probe_prompts(PROMPT_SAMPLE))
    chars = tokens * CHARS_PER_TOKEN
    body = (text * (chars // len(text) + 1))[:chars]
    return [f"[{nonce}-{i}] {body}" for i in range(count)]


def wave_prompts(count: int) -> list[str]:
    """`count` prompts for the decoding waves: the shipped set's, taken again with a numbered suffix where the run's
    concurrency asks for more than it holds (200 requests in flight need 400 prompts), so every wave is full."""
    base = probe_prompts(count)
    return [base[i % len(base)] + (f" ({i // len(base)})" if i >= len(base) else "") for i in range(count)]


def probe_throughput(
    http: HttpClient,
    target: TargetConfig,
    *,
    concurrency: int = 16,
    lengths: tuple[int, int] = (8, 40),
    clock: Clock = SYSTEM_CLOCK,
    max_model_len: int | None = None,
    headers: dict[str, str] | None = None,
) -> Throughput:
    """Two waves of `concurrency` real requests, each generating exactly the given number of tokens
    (ignore_eos). A wave takes a + b x length: b is the decoding step, a the prefill and handling, which a
    single short wave would count as decoding and so underestimate the throughput of long answers. Then one
    request alone: the evaluation sends its prompts one at a time, far slower in tokens/s than a batch. Last, a
    wave of long prompts answered with one token each: extraction is that (one forward pass over every sample's
    tokens), and it runs at prefill speed, tens of times the decoding rate on a GPU. `headers`: production's key."""
    url = f"{target.base_url}/v1/chat/completions"

    def one(prompt: str, max_tokens: int) -> dict[str, int]:
        body = {
            "model": target.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "ignore_eos": True,  # vLLM's sampling extension
        }
        try:
            response = http.post_json(url, body, headers=headers, timeout=max(60.0, max_tokens * 5.0))
            if response.status != 200:
                raise MeasureError(f"HTTP {response.status}: {response.body[:200]}")
            usage = response.json()["usage"]
            return {"prompt_tokens": int(usage["prompt_tokens"]), "completion_tokens": int(usage["completion_tokens"])}
        except (HttpError, ValueError, KeyError, TypeError) as exc:
            raise MeasureError(
                f"The throughput probe against {target.base_url} failed ({exc}); start the server, or give the "
                "figure with --throughput TOKENS_PER_S."
            ) from None

    prompts = wave_prompts(2 * concurrency)
    prefill_tokens = min(PREFILL_PROBE_TOKENS, max_model_len // 2) if max_model_len else PREFILL_PROBE_TOKENS
    long_prompts = prefill_prompts(min(concurrency, PREFILL_PROBE_REQUESTS), prefill_tokens, f"{clock.now():.6f}")
    waves: list[tuple[int, float]] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="probe") as pool:
        for wave, length in enumerate(lengths):
            started = clock.monotonic()
            batch = prompts[wave * concurrency : (wave + 1) * concurrency]
            futures = [submit_in_task(pool, f"probe-{wave}-{i}", one, p, length) for i, p in enumerate(batch)]
            tokens = sum(future.result()["completion_tokens"] for future in futures)
            waves.append((tokens, clock.monotonic() - started))
        started = clock.monotonic()
        alone = submit_in_task(pool, "probe-alone", one, prompts[0], lengths[1]).result()["completion_tokens"]
        single_s = clock.monotonic() - started
        started = clock.monotonic()
        futures = [submit_in_task(pool, f"probe-prefill-{i}", one, p, 1) for i, p in enumerate(long_prompts)]
        prefilled = sum(future.result()["prompt_tokens"] for future in futures)
        prefill_s = clock.monotonic() - started
    (short_tokens, short_s), (long_tokens, long_s) = waves
    step = (long_s - short_s) / (lengths[1] - lengths[0])
    if step > 0 and short_s - lengths[0] * step <= long_s * IMPLAUSIBLE_OVERHEAD:
        tokens_per_s, overhead_s = concurrency / step, max(0.0, short_s - lengths[0] * step) / concurrency
    else:
        # The waves disagree with a + b x length (production's own traffic, or a shared machine, changed between
        # them): a fit would read noise as a fast decoder, so plan on the long wave's plain rate, which counts its
        # handling as decoding and can only err slow.
        tokens_per_s, overhead_s = long_tokens / long_s, 0.0
    return Throughput(
        tokens_per_s=tokens_per_s,
        overhead_s=overhead_s,
        single_tok_s=alone / single_s if single_s > 0 else None,
        prefill_tok_s=prefilled / prefill_s if prefill_s > 0 and prefilled else None,
        prefill_tokens=prefilled,
        prefill_requests=len(long_prompts),
        requests=len(prompts) + 1 + len(long_prompts),
        completion_tokens=short_tokens + long_tokens + alone,
        wall_s=short_s + long_s + single_s + prefill_s,
        concurrency=concurrency,
    )
