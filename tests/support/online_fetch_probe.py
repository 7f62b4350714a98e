"""Test helper run by the target venv's Python: one sample asked of extraction_server_standin.py through the real
extract_vllm.VllmBackend (its server lifecycle, request, lock wait and checks).

    python online_fetch_probe.py --states FILE --tokens 1,2,3 --work DIR

Prints one JSON object: `path` (the file fetch_file accepted) or `refused` (its message), and `staging`, the names
left in the staging directory once fetch_file has returned or raised.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))

import vllm_server
from extract_plan import Sample
from extract_vllm import VllmBackend

TESTS_SUPPORT = Path(__file__).resolve().parent
LAYERS = [2, 15, 27, 30]  # extraction.write_sample_file's default


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--states", type=Path, required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    staging = args.work / "staging"
    staging.mkdir(parents=True)
    port = vllm_server.free_port()
    argv = [
        sys.executable, str(TESTS_SUPPORT / "extraction_server_standin.py"), "--port", str(port),
        "--staging", str(staging), "--states", str(args.states),
    ]  # fmt: skip
    backend = VllmBackend(
        argv, dict(os.environ), staging, args.work / "server.log", concurrency=1, request_timeout=30,
        ready_timeout=60, dtype=torch.bfloat16, layer_ids=LAYERS,
    )  # fmt: skip
    token_ids = torch.tensor([int(token) for token in args.tokens.split(",")], dtype=torch.int64)
    sample = Sample(7, "conversation-7", token_ids, torch.ones_like(token_ids, dtype=torch.bool))
    try:
        result: dict[str, object] = {"path": str(backend.fetch_file(sample))}
    except RuntimeError as error:
        result = {"refused": str(error)}
    result["staging"] = sorted(path.name for path in staging.iterdir())
    backend.server.stop()  # not close(): that empties the staging directory the result describes
    print(json.dumps(result))


if __name__ == "__main__":
    main()
