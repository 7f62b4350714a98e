#!/usr/bin/env python3
"""Fetch a drafter checkpoint to finetune from, check that it is complete and fits the target, and make the
drafter training takes.

Run on the GPU host by the ML environment's interpreter (huggingface_hub, which vLLM installs; torch and
speculators once --target is given):

    python download.py --source AQ-MedAI/Kimi-K2-Instruct-eagle3 --out /data/drafter --target /data/models/kimi
    python download.py --source /data/my-drafter      # a local directory: validated and used as is

A hub repo id is downloaded into --out with huggingface_hub (JSON, safetensors, tokenizer and text files
only). Files already there are kept, so running it again resumes; a finished download is recognised by
its marker file and not fetched again (--refresh checks the hub for a newer revision).

Either way the directory is validated: config.json must parse; the weights must be model.safetensors, or
model.safetensors.index.json plus every shard it names; every safetensors header is read and the file's
size checked against it, so a truncated file is found without loading torch.

With --target (the target model's directory) the drafter is then checked against it (hidden size, vocabulary,
draft vocabulary, aux layers, special tokens, tensor shapes) and made into the drafter training takes, in
speculators' format: a SpecForge (EAGLE-3) drafter is converted (convert_drafter.py), a speculators one copied
with its config naming the target as verifier and its weights linked. It goes to --ready (default for a hub id:
OUT/speculators); a local directory without --ready is converted into a temporary directory that is removed
after. Either way it is loaded as train.py loads it, so a drafter that cannot be finetuned fails here, before
generation and extraction, and not when training starts.

Offline (HF_HUB_OFFLINE=1, which eyas sets for a host whose config says hub_offline = true, or no route to the
hub within --connect-timeout), an unknown or gated repo, or an interpreter without huggingface_hub ends within
seconds with the reason and the fix. Progress
lines count bytes on disk; at the end one JSON line describes the checkpoint, and under "drafter" the one
training takes. Exit codes: 0 valid checkpoint, 1 error, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import progress
from drafter_format import INDEX, SINGLE_FILE, detect, mismatches, tensor_mismatches, weight_files
from hub_failure import explain, not_importable
from target_model import TargetLoadError, read_config, text_fields

PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.md", "*.model", "*.tiktoken"]
MARKER = ".eyas-download.json"
READY = "speculators"  # OUT/READY: the drafter training takes, made from a hub download (--ready's default)
MAX_HEADER = 100 * 1024 * 1024


class Invalid(Exception):
    """The checkpoint or its source cannot be used; the message says why and what to do."""


def check_safetensors(path: Path) -> dict[str, list[int]]:
    """Tensor shapes from the header; raises Invalid when the file is shorter or longer than it says."""
    with path.open("rb") as f:
        size_field = f.read(8)
        length = int.from_bytes(size_field, "little") if len(size_field) == 8 else -1
        if not 0 < length <= MAX_HEADER:
            raise Invalid(f"{path} is not a safetensors file (no valid header); download it again.")
        try:
            header = json.loads(f.read(length))
        except ValueError:
            raise Invalid(f"{path} has a corrupt safetensors header; download it again.") from None
    header.pop("__metadata__", None)
    expected = 8 + length + max((entry["data_offsets"][1] for entry in header.values()), default=0)
    actual = path.stat().st_size
    if actual != expected:
        raise Invalid(f"{path} has {actual} bytes but its header describes {expected}: truncated; download again.")
    return {name: entry["shape"] for name, entry in header.items()}


def validate(directory: Path, target: Path | None = None) -> dict[str, Any]:
    """What the checkpoint holds; raises Invalid naming the first missing or broken file, or, given the target's
    directory, every way the drafter does not fit it (drafter_format.py)."""
    try:
        config = json.loads((directory / "config.json").read_text())
    except FileNotFoundError:
        raise Invalid(f"{directory} has no config.json: it is not a model checkpoint directory.") from None
    except ValueError as exc:
        raise Invalid(f"{directory}/config.json is not valid JSON ({exc}).") from None
    files = weight_files(directory)
    if files is None:
        raise Invalid(
            f"{directory} has no model.safetensors nor model.safetensors.index.json "
            "(vLLM serves a drafter from safetensors only)."
        )
    expected = None if files == [SINGLE_FILE] else set(json.loads((directory / INDEX).read_text())["weight_map"])
    shapes: dict[str, list[int]] = {}
    for name in files:
        if not (directory / name).is_file():
            raise Invalid(f"{directory} lacks the shard {name} named by its index; run the download again.")
        shapes.update(check_safetensors(directory / name))
    if expected is not None and expected != set(shapes):
        raise Invalid(f"The shards in {directory} do not hold the tensors their index names; download again.")
    if target is not None:
        check_fits(directory, config, shapes, target)
    keys = ("architectures", "model_type", "speculators_model_type", "hidden_size", "vocab_size", "draft_vocab_size")
    return {
        "path": str(directory),
        "format": detect(config),
        "config": {key: config[key] for key in keys if key in config},
        "weights": files,
        "tensors": len(shapes),
        "parameters": sum(math.prod(shape) for shape in shapes.values()),
        "bytes": sum((directory / name).stat().st_size for name in files),
    }


def check_fits(directory: Path, config: dict[str, Any], shapes: dict[str, list[int]], target: Path) -> None:
    try:
        text = text_fields(read_config(target))
    except TargetLoadError as error:
        raise Invalid(str(error)) from None
    problems = mismatches(config, text) + tensor_mismatches(shapes, text)
    if problems:
        raise Invalid(
            f"The drafter in {directory} cannot be used for the target in {target}: {'; '.join(problems)}. Use a "
            "drafter trained for this target, or leave pipeline.drafter_base unset to train one from scratch."
        )


def prepare(source: Path, target: Path, ready: Path | None) -> dict[str, Any]:
    """The drafter training takes, made from the validated `source` in `ready` (None: a temporary directory, removed
    after) and loaded as train.py loads it; raises Invalid with the reason when it cannot be converted or loaded."""
    from convert_drafter import convert, linked_copy, load_for_training

    kind = detect(json.loads((source / "config.json").read_text()))
    progress.emit(phase="prepare", format=kind, done=0, total=1)
    with tempfile.TemporaryDirectory(prefix="eyas-drafter-") as scratch:
        out = ready or Path(scratch) / "drafter"
        try:
            if kind == "specforge":
                mapping = convert(source, target, out)["mapping"]
            else:
                linked_copy(source, target, out)
                mapping = None
            model = load_for_training(out)
        except SystemExit as exc:  # convert_drafter's own refusals, which name the reason
            raise Invalid(str(exc).removeprefix("convert_drafter: ")) from None
        except Exception as exc:  # speculators' and torch's: a missing or misshapen tensor, a verifier of another width
            raise Invalid(
                f"The drafter in {source} does not load as training would finetune it for the target in {target} "
                f"({type(exc).__name__}: {exc}). Use a drafter trained for this target, or leave "
                "pipeline.drafter_base unset to train one from scratch."
            ) from None
        progress.emit(phase="prepare", format=kind, done=1, total=1)
        return {
            "path": str(ready) if ready else None,
            "format": "speculators",
            "converted_from": kind if kind == "specforge" else None,
            "mapping": mapping,
            "parameters": sum(parameter.numel() for parameter in model.parameters()),
            "aux_layer_ids": list(model.target_layer_ids),
        }


def reachable(endpoint: str, timeout: float) -> str | None:
    """Why the hub (or the proxy to it) cannot be reached within `timeout` s, or None when it can.
    Run in a thread, so a resolver that hangs is bounded too."""
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    parts = urlsplit(proxy or endpoint)
    address = (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection(address, timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc.strerror or exc))

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        return f"no answer from {address[0]}:{address[1]} within {timeout:g} s"
    return None if outcome[0] is None else f"{address[0]}:{address[1]}: {outcome[0]}"


def bounded(call: Callable[[], Any], timeout: float, what: str) -> Any:
    """call() with a deadline: huggingface_hub sets none on its metadata requests, so a hub (or proxy)
    that accepts the connection and never answers would hang the job for hours."""
    outcome: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if not outcome:
        raise Invalid(f"{what}: no answer within {timeout:g} s. Check the network (HF_ENDPOINT, HTTPS_PROXY).")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def report_bytes(directory: Path, total: int, stop: threading.Event) -> None:
    while not stop.wait(10):
        files = (path for path in directory.rglob("*") if path.is_file())
        # OUT/READY, made by an earlier run, is not part of the download.
        done = sum(path.stat().st_size for path in files if path.relative_to(directory).parts[0] != READY)
        progress.emit(done=min(done, total), total=total, unit="bytes")


def download(args: argparse.Namespace) -> dict[str, Any]:
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError as exc:
        raise Invalid(not_importable(exc, args.source, sys.executable)) from None

    out = Path(args.out).resolve()
    wanted = {"repo": args.source, "revision": args.revision}
    marker = out / MARKER
    if not args.refresh and marker.is_file() and json.loads(marker.read_text()) == wanted:
        return {**validate(out, args.target), "source": "hub (already downloaded)"}
    offline_fix = (
        "Download it where the hub can be reached, copy the directory here and pass --source DIR "
        f"(or fix the network or HF_ENDPOINT={constants.ENDPOINT})."
    )
    if constants.HF_HUB_OFFLINE:
        raise Invalid(
            f"HF_HUB_OFFLINE is set, so {args.source} cannot be fetched: eyas sets it for a host whose config says "
            "hub_offline = true ([hosts.<name>] in the eyas config). Where this host can reach the hub, set "
            "hub_offline = false; otherwise download it where the hub can be reached, copy the directory to this "
            "host and pass --source DIR (pipeline.drafter_base = that directory)."
        )
    problem = reachable(constants.ENDPOINT, args.connect_timeout)
    if problem:
        raise Invalid(f"The Hugging Face hub cannot be reached ({problem}). {offline_fix}")
    token = os.environ.get(args.token_env) if args.token_env else None
    common: dict[str, Any] = {"revision": args.revision, "local_dir": out, "allow_patterns": PATTERNS, "token": token}
    common["etag_timeout"] = args.connect_timeout
    try:
        listing = functools.partial(snapshot_download, args.source, dry_run=True, **common)
        plan = bounded(listing, 6 * args.connect_timeout, f"Listing {args.source} on the hub")
        total = sum(entry.file_size or 0 for entry in plan)
        progress.emit(done=0, total=total, unit="bytes")
        stop = threading.Event()
        threading.Thread(target=report_bytes, args=(out, total, stop), daemon=True).start()
        try:
            snapshot_download(args.source, **common)
        finally:
            stop.set()
    except Invalid:
        raise
    except Exception as exc:  # huggingface_hub's errors, often wrapping the cause (hub_failure.py), and OSError
        reason = explain(exc, args.source, args.revision, constants.ENDPOINT)
        raise Invalid(
            reason or f"Downloading {args.source} failed ({type(exc).__name__}: {exc}); run it again to resume."
        ) from None
    result = {**validate(out, args.target), "source": "hub"}
    marker.write_text(json.dumps(wanted))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="hub repo id (org/name), or a local checkpoint directory")
    parser.add_argument("--out", help="where a hub checkpoint is downloaded to (required for a repo id)")
    parser.add_argument("--revision", help="branch, tag or commit of the repo (default: main)")
    parser.add_argument("--token-env", help="environment variable holding a hub token (private or gated repos)")
    parser.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to reach the hub (default 5)")
    parser.add_argument(
        "--target", type=Path, help="the target model's directory: refuse a drafter that does not fit it"
    )
    parser.add_argument(
        "--ready", type=Path,
        help="with --target: where the drafter training takes is written, in speculators' format (default for a hub "
        f"id: OUT/{READY}; for a local directory: a temporary one, removed after the check)",
    )  # fmt: skip
    parser.add_argument("--refresh", action="store_true", help="ask the hub again even when already downloaded")
    args = parser.parse_args()
    local = Path(args.source).expanduser()
    ready = args.ready
    try:
        if local.is_dir():
            result = {**validate(local.resolve(), args.target), "source": "local"}
        elif args.source.startswith(("/", ".", "~")) or args.source.count("/") != 1:
            raise Invalid(f"{args.source} is neither an existing directory nor a hub repo id like org/name.")
        elif not args.out:
            parser.error("--out is required to download a hub repo")
        else:
            result = download(args)
            ready = ready or Path(result["path"]) / READY
        if args.target is not None:
            result["drafter"] = prepare(Path(result["path"]), args.target, ready and ready.resolve())
    except Invalid as exc:
        raise SystemExit(f"download.py: {exc}") from None
    progress.emit(done=result["bytes"], total=result["bytes"], unit="bytes")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
