"""Benchmark: how good a drafter the embedded default can train, on real ShareGPT prompts, and what moves it.

The target (the embedded SmolLM2 server, `eyas target up`) answers ShareGPT training prompts; the held-out
prompts come from the other side of prompt_split.py's hash split, so they are never trained on. The data
(generation, extraction, draft vocabulary) is made once; then each experiment trains a drafter from it with
other training settings and is measured at k=3 from vLLM's own counters (acceptance only: one server). The
best one is measured in full (k = 1, 3 and 5 against the baseline, with bootstrap intervals over prompts) and
its result is written to runs/bench-drafter/evaluation.json, beside vLLM's n-gram speculation (no drafter) and the
target alone on the same prompts and flags.

    .venv/bin/python tests/bench/bench_drafter_quality.py [--conversations 400 ...] [--experiments a b] [--keep DIR]

Prints the experiment table (one row per training recipe) and the best recipe's figures. About an hour on 2
quiet cores at the defaults.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from drafter_pipeline import Pipeline, Sizes, add_size_options, sizes_from, split_prompts, work_root
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = Sizes(
    conversations=400, answer_tokens=192, draft_vocab=8192, epochs=4, total_seq_len=512, eval_tokens=96,
    eval_concurrency=1, lr=1e-3,
)  # fmt: skip
# Each experiment: train.py flags over the shared data (and the sizes it changes, for the table).
EXPERIMENTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "recipe": ({}, []),
    "lr-3e-3": ({"lr": 3e-3}, []),
    "epochs-8": ({"epochs": 8}, []),
    "ttt-1": ({}, ["--ttt-steps", "1"]),
    # drafter_recipe.py's choices, each set back to speculators' own, and all three together.
    "shared-norm": ({}, ["--aux-norm", "shared"]),
    "ones-norm": ({}, ["--output-norm-init", "ones"]),
    "warmup-1pct": ({}, ["--warmup-ratio", "0.01"]),
    "speculators": ({}, ["--aux-norm", "shared", "--output-norm-init", "ones", "--warmup-ratio", "0.01"]),
}


def row(name: str, sizes: Sizes, extra: list[str], result: dict[str, Any], seconds: float) -> dict[str, Any]:
    interval = (result.get("intervals") or {}).get("mean_acceptance_length") or [None, None]
    return {
        "experiment": name,
        "samples": sizes.conversations,
        "epochs": sizes.epochs,
        "lr": sizes.lr,
        "train_flags": " ".join(extra),
        "k": result["k"],
        "mean_acceptance_length": result["mean_acceptance_length"],
        "interval": interval,
        "per_position": result["per_position"],
        "train_minutes": round(seconds / 60, 1),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("experiment", "samples", "epochs", "lr", "flags", "accept@3", "95% interval", "per position", "train min")
    print(f"{head[0]:<12} {head[1]:>7} {head[2]:>6} {head[3]:>7} {head[4]:<16} {head[5]:>8} {head[6]:>15} "
          f"{head[7]:<20} {head[8]:>9}")  # fmt: skip
    for r in rows:
        low, high = r["interval"]
        interval = f"[{low:.2f}, {high:.2f}]" if low is not None else "-"
        positions = ", ".join(f"{p:.2f}" for p in r["per_position"])
        accept, minutes = r["mean_acceptance_length"], r["train_minutes"]
        print(f"{r['experiment']:<12} {r['samples']:>7} {r['epochs']:>6} {r['lr']:>7.0e} {r['train_flags']:<16} "
              f"{accept:>8.3f} {interval:>15} {positions:<20} {minutes:>9}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_options(parser, DEFAULTS)
    parser.add_argument("--held-out", type=int, default=32, help="held-out ShareGPT prompts measured (default 32)")
    parser.add_argument("--experiments", nargs="+", choices=sorted(EXPERIMENTS), default=list(EXPERIMENTS))
    parser.add_argument(
        "--train-flags", default="", help="train.py flags every experiment adds (e.g. '--ttt-steps 1', as the demo)"
    )
    parser.add_argument("--port", type=int, default=8873, help="evaluate.py's servers, one at a time")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench-drafter" / "evaluation.json")
    args = parser.parse_args()
    sizes = sizes_from(args, DEFAULTS)
    target = EmbeddedTarget.from_env()
    with work_root(args.keep, "eyas-bench-quality-") as root:
        prompts, held_out = split_prompts(target, root, sizes.conversations, args.held_out)
        run = Pipeline(target, target.base_url, SERVED_MODEL, root, sizes, args.port, prompts, held_out, "sharegpt")
        run.prepare_data()
        print("data: " + ", ".join(f"{phase} {seconds / 60:.1f} min" for phase, seconds in run.seconds.items()))
        rows, best = [], None
        for name in args.experiments:
            changes, extra = EXPERIMENTS[name]
            extra = [*args.train_flags.split(), *extra]
            run.sizes = replace(sizes, **changes)
            drafter = root / f"drafter-{name}"
            run.train(drafter, *extra, phase=f"train-{name}")
            result = run.evaluate(drafter, f"accept-{name}", "--k", "3", "--acceptance-only")
            rows.append(row(name, run.sizes, extra, result, run.seconds[f"train-{name}"]))
            print_table(rows[-1:])
            if best is None or result["mean_acceptance_length"] > best[1]:
                best = (name, result["mean_acceptance_length"])
        assert best is not None
        full = run.evaluate(root / f"drafter-{best[0]}", "evaluate-best", "--k", "1", "3", "5", "--ngram")
    full["experiment"] = best[0]
    full["data"] = {"source": "sharegpt", "train_prompts": sizes.conversations, "held_out_prompts": args.held_out}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(full, indent=2) + "\n")
    print("\nexperiments (k=3, acceptance from vLLM's counters on held-out ShareGPT prompts):")
    print_table(rows)
    print(f"\nbest: {best[0]}; written to {args.out}")
    for k, result in full["by_k"].items():
        low, high = (result.get("intervals") or {}).get("mean_acceptance_length") or [None, None]
        ngram = full["ngram"][k]
        print(f"k={k}: acceptance length {result['mean_acceptance_length']:.3f} [{low}, "
              f"{high}], speedup {result['speedup']:.3f}, outputs identical {result['outputs_identical']}; n-gram "
              f"(no drafter) acceptance {ngram['mean_acceptance_length'] or 1.0:.3f}, speedup {ngram['speedup']:.3f}; "
              f"no drafter 1.000 (baseline {result['tokens_per_s_baseline']:.1f} tokens/s)")  # fmt: skip


if __name__ == "__main__":
    main()
