#!/usr/bin/env python3
"""Generate a drafter's training data: the target model's own answers to a set of prompts.

Run on the GPU host by the ML environment's interpreter (it needs `openai`, which vLLM installs):

    python generate.py --input prompts.jsonl --output answers.jsonl \\
        --base-url http://127.0.0.1:8000 --model MODEL --concurrency 200 --max-tokens 2048

Input: JSONL, one sample per line: ShareGPT style {"id", "conversations": [{"from": "human", "value": ...}]}
(role/content turns and a "messages" key work too), or {"id", "prompt"}. The corpus's own assistant turns
are dropped and every user turn is answered by the target in order, so the whole conversation is the
target's. A line without an id gets one from a hash of its turns (identical prompts are generated once).
Each later turn carries the earlier answers, whose lengths only the target decides: before asking one, its request
is counted by the server's own /tokenize, and when that count and an answer of --max-tokens would pass
--max-seq-len or the server's context, the conversation ends with the turns answered so far (a record's
"cut_turns" says how many questions were left unasked).

Thinking models: an answer's reasoning is kept beside its content, as "reasoning", when the server's reasoning
parser splits it off (vLLM's `reasoning`, or `reasoning_content` in older versions), and is sent back with the
later turns, where the chat template decides what of it the model sees; without a parser it stays inside the
content, as the model wrote it. extract.py renders it back through the template (conversations.py).

Output: append-only JSONL, one line per finished sample, flushed as it finishes:
{"id", "conversations": [{"role", "content"[, "reasoning"]}, ...], "usage": {...}, "finish_reason"[, "cut_turns"]}.
usage sums the
server's counts over the sample's requests; usage.sequence_tokens is the length of the whole conversation.
Kill it at any moment and run the same command again: ids already in the output are skipped (a torn last
line is cut off first), so every sample ends up exactly once. One process per output (a file lock).
--shard I/N takes only the samples whose id hashes to I (of N), so N processes, each with its own output and
often its own server, generate disjoint shares whose union is what one process would write.

Timeouts, connection errors, 5xx, 429 and malformed answers are retried with exponential backoff and
jitter. A sample that still fails is written to <output>.failed.jsonl (rewritten by every run) and retried
by the next run; it does not stop this one. --abort-after failures in a row (server down, wrong model)
end the run. SIGTERM/SIGINT: no new samples are started, requests in flight get --drain seconds to
finish and be written, the summary is written; a second signal stops at once. Progress: `EYAS_PROGRESS`
lines (done, failed, total, tokens_per_s, eta_s); at the end a summary JSON (--summary).
Exit codes: 0 every sample was tried (failures are in the summary) and the output holds at least one, 1 fatal
error (an output with no sample at all is one: every request refused, e.g. HTTP 400 because --max-tokens is over the
server's max_model_len, or no input line is a sample; the message gives the first error, the server's own reason),
2 bad arguments, 3 stopped by a signal before the end (run again to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import openai

import progress
from done_ids import read_done
from generate_input import Plan, Sample, load_input
from shards import WHOLE, parse_shard
from try_again import Tries

EXIT_FATAL, EXIT_STOPPED = 1, 3
RETRY_STATUS = {408, 409, 429}  # and every 5xx


def with_reasoning_names(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The conversation as it goes back to the server: an answer's reasoning under both names vLLM has read from
    an assistant turn (`reasoning`, and `reasoning_content` before it), so the chat template gets it either way."""
    return [turn | {"reasoning_content": turn["reasoning"]} if "reasoning" in turn else turn for turn in messages]


class Fatal(Exception):  # the run cannot go on; the message names the problem and the fix
    pass


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in RETRY_STATUS
    # TimeoutError: our own deadline; the others: a body that is not a chat completion.
    return isinstance(exc, openai.APIConnectionError | TimeoutError | ValueError | KeyError | TypeError | IndexError)


def describe(exc: BaseException, limit: int = 300) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {str(exc.message)[:limit]}"
    return f"{type(exc).__name__}: {str(exc)[:limit] or 'no detail'}"


class Generator:
    def __init__(self, args: argparse.Namespace, plan: Plan, out: IO[bytes], failed: IO[bytes]) -> None:
        self.args, self.plan, self.out, self.failed_file = args, plan, out, failed
        # Keep every connection alive (openai keeps 100); the class comes from openai's own HTTP library.
        n = args.concurrency
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=n, max_keepalive_connections=n)
        self.client = openai.AsyncOpenAI(
            base_url=args.base_url,
            api_key=os.environ.get(args.api_key_env or "", "") or "EMPTY",
            max_retries=0,  # retried here, with jitter and a count
            timeout=args.timeout,
            http_client=openai.DefaultAsyncHttpxClient(limits=limits),
        )
        self.tokenize_url = args.base_url.removesuffix("/v1") + "/tokenize"  # vLLM's, beside /v1
        self.queue = iter(plan.pending)
        self.cut_turns = 0  # questions left unasked, as their conversations would pass --max-seq-len
        self.done = self.failed = self.retries = self.in_a_row = 0
        self.first_error = ""  # the server's reason for the first sample that failed, whole (vLLM's 400 is ~300 B)
        self.tokens: Counter[str] = Counter()
        self.finish: Counter[str] = Counter()
        self.stopping = False
        self.fatal: str | None = None
        self.workers: list[asyncio.Task[None]] = []
        self.started = time.monotonic()

    async def call(self, make: Any) -> Any:
        """Await `make()` under the deadline, retrying what a healthy server could answer next time."""
        tries = Tries(self.args.retries + 1, retryable)
        while True:
            try:
                async with asyncio.timeout(self.args.timeout):
                    return await make()
            except Exception as exc:
                if not tries.again(exc):
                    raise
                self.retries += 1
                await asyncio.sleep(tries.backoff_s(self.args.backoff, self.args.backoff_max))

    async def preflight(self) -> None:
        try:
            listing = await self.call(self.client.models.list)
        except Exception as exc:
            raise Fatal(
                f"No usable server at {self.args.base_url} ({describe(exc)}). Start the server, or fix "
                "--base-url (e.g. http://127.0.0.1:8000) and --api-key-env."
            ) from None
        served = [model.id for model in listing.data]
        if self.args.model not in served:
            raise Fatal(f"The server at {self.args.base_url} serves {served}, not {self.args.model!r}: fix --model.")

    async def chat(self, messages: list[dict[str, str]]) -> tuple[dict[str, str], dict[str, int], str]:
        """One completion as (the assistant turn, usage, finish reason); a malformed answer raises here, so it is
        retried. The turn holds the reasoning too when the server's reasoning parser split it off the content."""
        body: dict[str, Any] = {"model": self.args.model, "messages": messages, "max_tokens": self.args.max_tokens}
        if self.args.temperature is not None:
            body["temperature"] = self.args.temperature
        # A plain POST: no SDK parameter transform nor response models (a quarter of its CPU); errors as create().
        answer = json.loads(await self.client.post("/chat/completions", body=body, cast_to=bytes))
        choice, counts = answer["choices"][0], answer["usage"]
        usage = {key: int(counts[key]) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
        message = choice["message"]
        turn = {"role": "assistant", "content": str(message["content"] or "")}
        reasoning = message.get("reasoning") or message.get("reasoning_content")
        if reasoning:
            turn["reasoning"] = str(reasoning)
        return turn, usage, str(choice["finish_reason"])

    async def fits(self, messages: list[dict[str, str]]) -> bool:
        """Whether a request of these messages, with an answer of up to --max-tokens, fits --max-seq-len and the
        server's context; counted by the server itself (vLLM's /tokenize, chat template included)."""
        body = {"model": self.args.model, "messages": messages, "add_generation_prompt": True}
        answer = json.loads(await self.client.post(self.tokenize_url, body=body, cast_to=bytes))
        limit = min(int(answer.get("max_model_len") or sys.maxsize), self.args.max_seq_len or sys.maxsize)
        return int(answer["count"]) + self.args.max_tokens <= limit

    async def generate(self, sample: Sample) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        usage: Counter[str] = Counter()
        finish = None
        questions = [index for index, turn in enumerate(sample.turns) if turn["role"] == "user"]
        for index, turn in enumerate(sample.turns):
            later = index > questions[0] and turn["role"] == "user"
            if later and not await self.call(lambda request=[*messages, turn]: self.fits(request)):
                unasked = sum(question >= index for question in questions)
                return self.record(sample, messages, usage, finish) | {"cut_turns": unasked}
            messages.append(turn)
            if turn["role"] == "user":
                answer, counts, finish = await self.call(lambda: self.chat(with_reasoning_names(messages)))
                messages.append(answer)
                usage.update(counts, requests=1)
                usage["sequence_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
        return self.record(sample, messages, usage, finish)

    @staticmethod
    def record(
        sample: Sample, messages: list[dict[str, str]], usage: Counter[str], finish: str | None
    ) -> dict[str, Any]:
        return {"id": sample.id, "conversations": messages, "usage": dict(usage), "finish_reason": finish}

    def write(self, file: IO[bytes], record: dict[str, Any]) -> None:
        file.write((json.dumps(record, ensure_ascii=False) + "\n").encode())  # one write, then flush: whole lines
        file.flush()

    async def worker(self) -> None:
        while not self.stopping:
            sample = next(self.queue, None)
            if sample is None:
                return
            try:
                record = await self.generate(sample)
            except Exception as exc:
                self.first_error = self.first_error or describe(exc, limit=1000)
                self.write(self.failed_file, {"id": sample.id, "error": describe(exc)})
                self.failed += 1
                self.in_a_row += 1
                if self.in_a_row >= self.args.abort_after and not self.fatal:
                    self.fatal = (
                        f"{self.in_a_row} samples in a row failed, the last with {describe(exc)}. "
                        "Is the server generating? Check its log, then run again to resume."
                    )
                    self.stop(drain=False)
                continue
            self.write(self.out, record)
            self.done += 1
            self.cut_turns += record.get("cut_turns", 0)
            self.in_a_row = 0
            self.tokens.update(record["usage"])
            self.finish[str(record["finish_reason"])] += 1

    def stop(self, drain: bool = True) -> None:
        """First signal: take no new samples, cancel what is unfinished after --drain s. Second: cancel now."""
        if self.stopping or not drain:
            for task in self.workers:
                task.cancel()
        else:
            print(f"generate.py: stopping, requests in flight get {self.args.drain:g} s", file=sys.stderr, flush=True)
            asyncio.get_running_loop().call_later(self.args.drain, self.stop, False)
        self.stopping = True

    def emit(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        finished = self.plan.already_done + self.done
        remaining = self.plan.total - finished - self.failed - len(self.plan.bad)
        progress.emit(
            done=finished,
            failed=self.failed + len(self.plan.bad),
            total=self.plan.total,
            tokens_per_s=round(self.tokens["completion_tokens"] / elapsed, 1),
            eta_s=round(remaining * elapsed / self.done, 1) if self.done else None,
        )

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(self.args.progress_every)
            self.emit()
            os.fsync(self.out.fileno())

    async def run(self) -> None:
        if self.plan.pending and not self.stopping:
            await self.preflight()
        self.started = time.monotonic()
        count = min(self.args.concurrency, len(self.plan.pending))
        self.workers = [asyncio.create_task(self.worker()) for _ in range(count)]
        ticker = asyncio.create_task(self.ticker())
        await asyncio.gather(*self.workers, return_exceptions=True)
        ticker.cancel()
        await self.client.close()
        self.emit()

    def nothing_made(self) -> str | None:
        """Why the output holds no sample at all when the run ended without a signal, else None: a job that
        produced nothing fails, so the next phase never starts on an empty file. A shard whose share of the input is
        empty (a hash of few ids over many shards) produced all it had."""
        if self.plan.already_done + self.done or (self.stopping and not self.fatal):
            return None
        if self.failed and self.fatal:  # --abort-after: its message, and the first reason
            return f"{self.fatal} None was generated; the first failure: {self.first_error}."
        if self.failed:
            return (
                f"All {self.failed} samples failed and none was generated; the first with {self.first_error}. Fix what "
                "the server refuses (an HTTP 400 about the context: --max-tokens and the prompts must fit the server's "
                "max_model_len), then run again."
            )
        if self.plan.bad:
            return (
                f"No sample was generated: none of the {len(self.plan.bad)} input lines is a sample (the first: "
                f"{self.plan.bad[0]['error']}). Give --input a JSONL of ShareGPT conversations, messages or "
                "{id, prompt} rows."
            )
        if self.plan.total == 0 and self.args.shard[1] == 1:
            return f"No sample was generated: {self.args.input} holds no prompt. Give --input a JSONL of prompts."
        return None

    @property
    def not_tried(self) -> int:
        return len(self.plan.pending) - self.done - self.failed

    def summary(self, code: int) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        return {
            "total": self.plan.total,
            "done": self.plan.already_done + self.done,
            "done_this_run": self.done,
            "already_done": self.plan.already_done,
            "failed": self.failed + len(self.plan.bad),
            "not_tried": self.not_tried,
            "retries": self.retries,
            "cut_turns": self.cut_turns,
            "usage_this_run": dict(self.tokens),
            "finish_reasons": dict(self.finish),
            "wall_s": round(elapsed, 3),
            "tokens_per_s": round(self.tokens["completion_tokens"] / max(elapsed, 1e-9), 1),
            "stopped": self.stopping and not self.fatal,
            "error": self.fatal,
            "exit_code": code,
        }


async def main_async(args: argparse.Namespace) -> int:
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if not Path(args.input).is_file():
        raise Fatal(f"No input file at {args.input}: give a JSONL of prompts with --input.")
    with output.open("ab") as out:
        try:
            fcntl.flock(out, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until exit: one writer per output
        except BlockingIOError:
            raise Fatal(f"Another generate.py is writing {output}; wait for it or stop it first.") from None
        plan = load_input(Path(args.input), read_done(output), args.limit, args.shard)
        out.seek(0, os.SEEK_END)  # read_done may have cut a torn line
        with open(args.failed, "wb") as failed:
            run = Generator(args, plan, out, failed)
            for signum in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().add_signal_handler(signum, run.stop)
            for entry in plan.bad:
                run.write(failed, entry)
            try:
                await run.run()
            except Fatal as exc:
                run.fatal = str(exc)
            # Nothing to train on: the run fails with the server's first reason rather than hand on an empty file (an
            # --abort-after stop says so too, with that first reason instead of its last).
            run.fatal = run.nothing_made() or run.fatal
        os.fsync(out.fileno())
    code = EXIT_FATAL if run.fatal else EXIT_STOPPED if run.not_tried else 0
    summary = run.summary(code)
    tmp = Path(args.summary + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    tmp.replace(args.summary)
    print(json.dumps(summary), flush=True)
    if run.fatal:
        print(f"generate.py: {run.fatal}", file=sys.stderr)
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--input", required=True, help="JSONL of prompts (ShareGPT conversations, messages, or {id, prompt})")
    add("--output", required=True, help="JSONL of finished samples, appended to (and resumed from)")
    add("--base-url", required=True, help="the server, with or without /v1, e.g. http://127.0.0.1:8000")
    add("--model", required=True, help="served model name, as /v1/models lists it")
    add("--api-key-env", help="environment variable holding the server's API key (default: none)")
    add("--concurrency", type=int, default=64, help="requests in flight at once (default 64)")
    add("--max-tokens", type=int, default=2048, help="longest answer per turn, in tokens (default 2048)")
    add(
        "--max-seq-len",
        type=int,
        help="longest conversation, questions and answers, in tokens: a later question "
        "that would pass it with an answer of --max-tokens is not asked (default: the server's context)",
    )
    add("--temperature", type=float, help="sampling temperature (default: the server's, i.e. the model's own)")
    add("--limit", type=int, help="use only the first N samples of the input (default: all)")
    add("--timeout", type=float, default=600.0, help="seconds one request may take (default 600)")
    add("--retries", type=int, default=5, help="retries of a failed request before its sample fails (default 5)")
    add("--backoff", type=float, default=1.0, help="first retry waits up to this many seconds, doubling (default 1)")
    add("--backoff-max", type=float, default=60.0, help="longest wait between retries (default 60)")
    add("--abort-after", type=int, default=50, help="stop the run when this many samples fail in a row (50)")
    add("--drain", type=float, default=5.0, help="seconds requests in flight get after SIGTERM (default 5)")
    add("--progress-every", type=float, default=10.0, help="seconds between progress lines (default 10)")
    add("--shard", type=parse_shard, default=WHOLE, help="I/N: only the samples whose id hashes to shard I of N")
    add("--summary", help="summary JSON path (default: <output>.summary.json)")
    add("--failed", help="JSONL of samples that failed this run (default: <output>.failed.jsonl)")
    args = parser.parse_args(argv)
    if min(args.concurrency, args.max_tokens, args.abort_after, args.max_seq_len or 1) < 1 or args.retries < 0:
        parser.error("--concurrency, --max-tokens, --max-seq-len and --abort-after must be at least 1, --retries >= 0")
    stem = str(Path(args.output).with_suffix(""))
    args.summary = args.summary or stem + ".summary.json"
    args.failed = args.failed or stem + ".failed.jsonl"
    base = args.base_url.rstrip("/")
    args.base_url = base if base.endswith("/v1") else base + "/v1"
    return args


def main() -> None:
    args = parse_args()
    try:
        sys.exit(asyncio.run(main_async(args)))
    except Fatal as exc:
        sys.exit(f"generate.py: {exc}")


if __name__ == "__main__":
    main()
