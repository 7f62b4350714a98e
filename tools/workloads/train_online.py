"""train.py's online hidden states: the extraction server it starts for the samples extract.py left as token files,
and what fetches their hidden states from it (eyas's loop on a CPU; on CUDA speculators' own dataset, whose window
and bound are written down here). A standalone module beside train.py on the host, imported by its plain name as the
other workloads import their siblings; torch and vLLM's pieces load only when a run is online.
"""

from __future__ import annotations

import argparse
from typing import Any

import progress
from drafter_data import Staged


def open_online(args: argparse.Namespace, staged: Staged, device: str) -> Any:
    """The extraction server for the samples without hidden states on disk (None when every sample has them). On
    CUDA speculators' dataset asks it for them, and refuses a server not named as its --verifier-name-or-path
    (speculators/train/data.py, ArrowDataset._setup_client): it serves as the --verifier path there."""
    if not staged.online:
        return None
    import torch

    from extract_vllm import open_server

    assert staged.layer_ids is not None  # token files record them (drafter_data._token_file_shape)
    if args.connector == "auto":
        args.connector = "stock" if device == "cuda" else "cpu"
    return open_server(
        args, args.verifier, staged.layer_ids, staged.max_len, args.work / "online-staging",
        args.work / "extraction-server.log", torch.bfloat16, str(args.verifier) if device == "cuda" else None,
    )  # fmt: skip


def online_bound(args: argparse.Namespace, staged: Staged, server: Any) -> int:
    """The most bytes of fetched hidden states on disk at once, as the plan states it: --window samples of the
    longest length, in the dtype `server` writes (hidden_states_file.online_bound_bytes)."""
    from extract_vllm import server_dtype
    from hidden_states_file import online_bound_bytes

    dtype = server_dtype(server.server.argv, args.verifier)
    longest = max(args.total_seq_len, staged.max_len)
    return online_bound_bytes(args.window, longest, staged.hidden_size, staged.num_layers, dtype)


def speculators_online_summary(args: argparse.Namespace, staged: Staged, server: Any, gpus: int) -> None:
    """What eyas knows of a CUDA run's online fetching, written where the CPU loop writes its counts (WORK/SUMMARY):
    the window, the bound and the dataloader workers; no epochs, as speculators' dataset fetches and deletes the
    samples without telling eyas (the report says so)."""
    from online_fetch import SUMMARY, OnlineSummary

    summary = OnlineSummary(
        args.window, online_bound(args, staged, server), trainer="speculators", gpus=gpus, workers=args.num_workers
    )
    summary.save(args.work / SUMMARY)
    progress.emit(
        phase="online", samples=len(staged.online), window=args.window, bound_bytes=summary.bound_bytes,
        server_pid=server.server.pid, trainer="speculators", gpus=gpus, workers=args.num_workers,
    )  # fmt: skip


def online_source(args: argparse.Namespace, staged: Staged, server: Any) -> Any:
    """Fetches the online rows' hidden states into the staged directory ahead of each step (online_fetch.py)."""
    import datasets
    import torch

    from extract_plan import Sample
    from online_fetch import SUMMARY, OnlineHiddenStates, OnlineSummary

    rows = datasets.load_from_disk(str(staged.path / "dataset")).with_format(None)
    lengths = rows["seq_len"]

    def sample(row: int) -> Sample:
        item = rows[row]
        ids, mask = torch.tensor(item["input_ids"]), torch.tensor(item["loss_mask"], dtype=torch.bool)
        return Sample(row, f"row {row}", ids, mask)

    max_len = max(args.total_seq_len, staged.max_len)
    bound = online_bound(args, staged, server)
    summary_path = args.work / SUMMARY
    progress.emit(
        phase="online", samples=len(staged.online), window=args.window, bound_bytes=bound, server_pid=server.server.pid
    )
    return OnlineHiddenStates(
        server, staged.path / "hidden_states", {row: int(lengths[row]) for row in staged.online}, sample,
        window=args.window, max_len=max_len, concurrency=args.concurrency,
        summary=OnlineSummary.load(summary_path, args.window, bound), summary_path=summary_path,
    )  # fmt: skip
