"""The throughput probe times two waves of requests (8 and 40 tokens each) and reads decoding as the difference. When
the waves disagree with a + b x length (production's own traffic or a shared machine changed between them), the fit
reads the noise as a fast decoder; the probe then plans on the long wave's plain rate, which can only err slow.

Stand-in: a server whose answer takes a fixed time per wave, far more than its tokens explain, as a load that shifts
between the waves looks; no real server can be made to take exactly that."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.throughput_probe import probe_throughput
from eyas.tools.settings.config import TargetConfig

# Seconds an answer takes, by its max_tokens: the long wave only a little slower than the short one.
SECONDS = {8: 1.0, 40: 1.3}
CONCURRENCY = 4


@pytest.fixture
def shifting_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):  # HTTP/1.0: a connection per request, as the probe's threads each open
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            tokens = int(body["max_tokens"])
            time.sleep(SECONDS.get(tokens, 0.01))
            usage = {"prompt_tokens": 20, "completion_tokens": tokens, "total_tokens": 20 + tokens}
            data = json.dumps({"choices": [{"index": 0, "message": {"content": "x"}}], "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_waves_that_disagree_with_the_fit_plan_on_the_long_waves_plain_rate(shifting_server: str) -> None:
    target = TargetConfig(base_url=shifting_server, model="m")
    measured = probe_throughput(HttpClient(), target, concurrency=CONCURRENCY)
    plain = CONCURRENCY * 40 / SECONDS[40]  # 123 tokens/s, handling counted as decoding
    # The fit would say concurrency / ((1.3 - 1.0) / 32) = 427 tokens/s (more where the first wave also paid the
    # connections' set-up), with 0.9 s of a wave's 1 s as overhead.
    assert measured.overhead_s == 0.0
    assert plain / 1.5 < measured.tokens_per_s <= plain, measured
