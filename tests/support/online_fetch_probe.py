"""Test helper run by the target venv's Python: one sample fetched online, as each trainer fetches it, from the
extraction server train.py starts, with the stand-in (extraction_server_standin.py) in place of vLLM.

    python online_fetch_probe.py eyas|speculators --states FILE --tokens 1,2,3 --work DIR

A token file holds the sample (--tokens); drafter_data.stage stages it as an online row and train_online.open_online
starts the extraction server as run_cpu or run_speculators starts it, the stand-in writing --states for every request.
- eyas: extract_vllm.VllmBackend.fetch_file, as online_fetch.py calls it on CPU.
- speculators: speculators' own ArrowDataset (speculators/train/data.py), built from the flags train_cuda's
  speculators_argv gives its trainer on CUDA, reads the row.
Prints one JSON object: what came back (`path`, or `refused` with the message; `input_ids` and `hidden_shape`, or
`unavailable` with its reason) and `staging`, the names left in the server's staging directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "workloads"))

import hidden_states_file
import train
import train_cuda
import train_online
import vllm_server
from drafter_data import Staged, stage
from extract_plan import Sample
from extraction_server_standin import STATES_ENV

TESTS_SUPPORT = Path(__file__).resolve().parent
STANDIN = "extraction_server_standin"
LAYERS = [2, 15, 27, 30]  # extraction.write_sample_file's default
HIDDEN_SIZE = 3  # extraction.write_sample_file's


def staged_sample(work: Path, tokens: list[int]) -> Staged:
    """One sample left as a token file (extract.py --offline-samples 0), staged as train.py stages it."""
    data = work / "data"
    data.mkdir(parents=True)
    ids = torch.tensor(tokens, dtype=torch.int64)
    tensors = {"token_ids": ids, "loss_mask": torch.ones_like(ids, dtype=torch.bool)}
    path = data / hidden_states_file.token_file_name(0)
    hidden_states_file.write(path, tensors, LAYERS, "conversation-0", HIDDEN_SIZE)
    return stage(data, work / "staged")


def fetch_with_eyas(args: argparse.Namespace, staged: Staged, sample_tokens: list[int]) -> dict[str, Any]:
    server = train_online.open_online(args, staged, "cpu")  # as train.run_cpu opens it
    ids = torch.tensor(sample_tokens, dtype=torch.int64)
    try:
        return {"path": str(server.fetch_file(Sample(0, "row 0", ids, torch.ones_like(ids, dtype=torch.bool))))}
    except RuntimeError as error:
        return {"refused": str(error)}
    finally:
        server.server.stop()  # not close(): that empties the staging directory the result describes


def fetch_with_speculators(args: argparse.Namespace, staged: Staged) -> dict[str, Any]:
    from hs_connectors import FileTransfer
    from speculators.train.data import ArrowDataset
    from speculators.train.recovery import SampleUnavailable

    server = train_online.open_online(args, staged, "cuda")  # as train.run_speculators opens it on a GPU host
    try:
        argv = train_cuda.speculators_argv(
            args, python=sys.executable, nproc=1, dataset=staged.path / "dataset",
            hidden_states=staged.path / "hidden_states", save_path=args.work / "speculators", init_drafter=None,
            checkpoint_freq=1.0, span=train_cuda.Span(epochs=1, max_steps=None, total=1),
            endpoint=f"{server.server.base_url}/v1",
        )  # fmt: skip

        def flag(name: str) -> str:
            return argv[argv.index(name) + 1]

        # As speculators' create_train_val_loaders builds its datasets from those flags (dataloader.py).
        dataset = ArrowDataset(
            max_len=int(flag("--total-seq-len")), datapath=flag("--data-path"),
            transfer=FileTransfer(Path(flag("--hidden-states-path"))), vllm_endpoint=flag("--vllm-endpoint"),
            on_missing=flag("--on-missing"), model=flag("--verifier-name-or-path"),  # type: ignore[arg-type]
        )  # fmt: skip
        item = dataset[0]
    finally:
        server.server.stop()
    if isinstance(item, SampleUnavailable):
        return {"unavailable": item.reason, "counts_as_failure": item.counts_as_failure}
    return {"input_ids": item["input_ids"].tolist(), "hidden_shape": list(item["hidden_states"].shape)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trainer", choices=["eyas", "speculators"])
    parser.add_argument("--states", type=Path, required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--work", type=Path, required=True)
    probe = parser.parse_args()
    tokens = [int(token) for token in probe.tokens.split(",")]
    staged = staged_sample(probe.work, tokens)
    args = train.parse_args([
        "--data", str(probe.work / "data"), "--verifier", str(probe.work / "verifier"), "--out",
        str(probe.work / "out"), "--online", "--val-ratio", "0.5", "--ready-timeout", "60",
    ])  # fmt: skip
    # Stand-in: the server process is this directory's module instead of vLLM's, given the same flags.
    vllm_server.API_SERVER_MODULE = STANDIN
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_SUPPORT), os.environ.get("PYTHONPATH")]))
    os.environ[STATES_ENV] = str(probe.states)
    fetched = {
        "eyas": lambda: fetch_with_eyas(args, staged, tokens),
        "speculators": lambda: fetch_with_speculators(args, staged),
    }
    result = fetched[probe.trainer]()
    result["staging"] = sorted(path.name for path in (args.work / "online-staging").iterdir())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
