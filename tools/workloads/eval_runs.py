"""The held-out prompts on evaluate.py's servers, and what each server did with them: texts, completion tokens,
seconds and vLLM's spec-decode counters.

Two orders. In turn: one server's prompts in one stretch, then the next server's (servers that start one after the
other, on a GPU host). Interleaved: servers up side by side get each prompt one after the other, the order rotated
by one per prompt, so none is always first; a change of load on the machine (a neighbour's job, a burst of I/O) then
falls on every server alike instead of on whichever was being measured at the time, and the per-prompt pairs the
speedup's interval resamples are measured moments apart. At --concurrency above 1 the unit is a block of that many
prompts in flight at once instead of one prompt.

At concurrency 1 each prompt's tokens, seconds and counters are kept (`per_prompt`): the confidence intervals resample
prompts. Above it, only the totals: requests in flight together have no seconds of their own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import progress
from http_fetch import fetch
from spec_metrics import Counters, scrape

# Deadlines for the whole exchange: a model listing or a metrics scrape, and one completion of --max-tokens.
LISTING_DEADLINE_S = 30.0
COMPLETION_DEADLINE_S = 600.0
INTERLEAVED, IN_TURN = "interleaved", "in turn"  # what the result's "measured" says

Messages = list[dict[str, str]]


def served_model(base_url: str) -> str:
    return str(json.loads(fetch(f"{base_url}/v1/models", deadline_s=LISTING_DEADLINE_S))["data"][0]["id"])


def metrics(base_url: str) -> Counters:
    return scrape(fetch(f"{base_url}/metrics", deadline_s=LISTING_DEADLINE_S).decode())


def rotation(servers: int, turn: int) -> list[int]:
    """The order in which `servers` servers get the `turn`-th prompt (or block): each one first, and each one last,
    once every `servers` turns."""
    return [(turn + offset) % servers for offset in range(servers)]


class ServerRun:
    """One server's run over the prompts, built up a prompt (or a block) at a time, warmed up first."""

    def __init__(self, name: str, base_url: str, max_tokens: int) -> None:
        self.name, self.base_url, self.max_tokens = name, base_url, max_tokens
        self.model = served_model(base_url)
        self.texts: list[str] = []
        self.per_prompt: list[dict[str, Any]] = []
        self.tokens, self.seconds = 0, 0.0
        self.first = self.before = Counters()

    def ask(self, messages: Messages) -> tuple[str, int]:
        body = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": self.max_tokens}
        answer = json.loads(fetch(f"{self.base_url}/v1/chat/completions", body, deadline_s=COMPLETION_DEADLINE_S))
        return answer["choices"][0]["message"]["content"], answer["usage"]["completion_tokens"]

    def warm_up(self, messages: Messages) -> None:
        """One request outside the timing and the counters."""
        self.ask(messages)
        self.first = self.before = metrics(self.base_url)

    def one(self, messages: Messages) -> float:
        """One prompt alone, its counters scraped after it; its tokens/s."""
        started = time.monotonic()
        text, tokens = self.ask(messages)
        seconds = time.monotonic() - started
        after = metrics(self.base_url)
        self.texts.append(text)
        self.per_prompt.append({"tokens": tokens, "seconds": seconds, "counters": after.minus(self.before)})
        self.before = after
        self._add(tokens, seconds)
        return tokens / seconds

    def block(
        self, prompts: Sequence[Messages], pool: ThreadPoolExecutor, answered: Callable[[int], None] = lambda done: None
    ) -> float:
        """Prompts in flight together, as many at once as the pool has threads (`answered` is told how many are done
        as each answer comes); their tokens/s over the block's wall time."""
        started = time.monotonic()
        answers = []
        for done, answer in enumerate(pool.map(self.ask, prompts), start=1):
            answers.append(answer)
            answered(done)
        seconds = time.monotonic() - started
        self.texts += [text for text, _ in answers]
        tokens = sum(count for _, count in answers)
        self.before = metrics(self.base_url)
        self._add(tokens, seconds)
        return tokens / seconds

    def _add(self, tokens: int, seconds: float) -> None:
        self.tokens += tokens
        self.seconds += seconds

    def result(self) -> dict[str, Any]:
        """What evaluate.py reads: the counters over the run, texts, tokens, seconds, tokens/s, and at concurrency 1
        each prompt's own."""
        found = {
            "counters": self.before.minus(self.first),
            "texts": self.texts,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "tokens_per_s": self.tokens / self.seconds,
        }
        return found | ({"per_prompt": self.per_prompt} if self.per_prompt else {})


def measure_in_turn(run: ServerRun, prompts: Sequence[Messages], concurrency: int) -> dict[str, Any]:
    """One server's prompts in one stretch: one at a time, or all of them through `concurrency` requests in flight."""
    run.warm_up(prompts[0])
    if concurrency == 1:
        for done, messages in enumerate(prompts, start=1):
            rate = run.one(messages)
            progress.emit(phase=run.name, done=done, total=len(prompts), tokens_per_s={run.name: round(rate, 2)})
        return run.result()
    pool = ThreadPoolExecutor(concurrency)
    try:
        run.block(prompts, pool, lambda done: progress.emit(phase=run.name, done=done, total=len(prompts)))
    finally:
        # Not `with`: on SIGTERM, waiting for the requests in flight would delay stopping the server.
        pool.shutdown(wait=False, cancel_futures=True)
    return run.result()


def measure_interleaved(runs: Sequence[ServerRun], prompts: Sequence[Messages], concurrency: int) -> None:
    """Each prompt (at concurrency 1) or block of `concurrency` prompts to every server in the turn's rotation. A
    progress line per turn gives each server's tokens/s on it."""
    for run in runs:
        run.warm_up(prompts[0])
    pool = ThreadPoolExecutor(concurrency)
    try:
        for turn, start in enumerate(range(0, len(prompts), concurrency)):
            chunk = prompts[start : start + concurrency]
            rates = {}
            for index in rotation(len(runs), turn):
                run = runs[index]
                rates[run.name] = round(run.one(chunk[0]) if concurrency == 1 else run.block(chunk, pool), 2)
            progress.emit(phase=INTERLEAVED, done=start + len(chunk), total=len(prompts), tokens_per_s=rates)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
