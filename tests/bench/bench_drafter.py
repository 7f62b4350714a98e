"""Benchmark: the embedded end-to-end drafter run, and what its drafter buys at k = 1, 3 and 5.

Runs the whole pipeline on the embedded target (its server must be up: `eyas target up`) over the prompt set
eyas ships (tools/data/prompts.jsonl; --held-out prompts spread over it are kept for evaluation): the target
answers the training prompts, then extract.py, vocab.py, train.py (CPU) and evaluate.py, and prints

- the wall time of each phase (the embedded run's budget is about 15 minutes for extract + vocab + train +
  evaluate on 2 cores),
- for k = 1, 3, 5: mean acceptance length, acceptance rate, per-position acceptance (from vLLM's counters)
  and the speedup (tokens/s with the drafter over tokens/s without it, measured side by side),
- the same acceptance for an untrained drafter at k = 3, the floor the training must clearly beat.

    .venv/bin/python tests/bench/bench_drafter.py [--conversations 297 --epochs 4 ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from drafter_corpus import split_prompt_set
from drafter_pipeline import Pipeline, Sizes, add_size_options, sizes_from, work_root
from eyas.tools.settings.sizes import PROMPT_SET
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

DEFAULTS = Sizes(
    conversations=297, answer_tokens=128, draft_vocab=2048, epochs=4, total_seq_len=256, eval_tokens=96,
    eval_concurrency=1, lr=3e-3,
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_options(parser, DEFAULTS)
    parser.add_argument("--held-out", type=int, default=16, help="prompts kept for evaluation (default 16)")
    parser.add_argument("--port", type=int, default=8872, help="evaluate.py's servers, one at a time")
    args = parser.parse_args()
    sizes = sizes_from(args, DEFAULTS)
    target = EmbeddedTarget.from_env()
    with work_root(args.keep, "eyas-bench-drafter-") as root:
        prompts, held_out = root / "prompts.jsonl", root / "held_out.jsonl"
        split_prompt_set(PROMPT_SET, prompts, held_out, args.held_out)
        run = Pipeline(target, target.base_url, SERVED_MODEL, root, sizes, args.port, prompts, held_out)
        run.prepare_data()
        run.train(root / "trained")
        run.train(root / "untrained", "--dry-run", phase="untrained")
        trained = run.evaluate(root / "trained", "evaluate", "--k", "1", "3", "5")
        floor = run.evaluate(root / "untrained", "evaluate-untrained", "--k", "3", "--acceptance-only")
    report(sizes, run, trained, floor)


def report(sizes: Sizes, run: Pipeline, trained: dict, floor: dict) -> None:
    print(f"sizes: {json.dumps(vars(sizes))}")
    budget = ("extract", "vocab", "train", "evaluate")
    for phase, seconds in run.seconds.items():
        note = " (in the 15-minute budget)" if phase in budget else ""
        print(f"{phase:>20}: {seconds / 60:5.2f} min{note}")
    print(f"{'budgeted phases':>20}: {sum(run.seconds[p] for p in budget) / 60:5.2f} min")
    print(f"baseline: {trained['tokens_per_s_baseline']:.1f} tokens/s; outputs identical at every k: "
          f"{all(r['outputs_identical'] for r in trained['by_k'].values())}")  # fmt: skip
    for k, result in trained["by_k"].items():
        per_position = ", ".join(f"{rate:.2f}" for rate in result["per_position"])
        print(
            f"k={k}: acceptance length {result['mean_acceptance_length']:.3f}, rate {result['acceptance_rate']:.3f}, "
            f"per position [{per_position}], speedup {result['speedup']:.3f} "
            f"({result['tokens_per_s_speculative']:.1f} tokens/s)"
        )
    print(f"untrained drafter, k=3: acceptance length {floor['mean_acceptance_length']:.3f}")


if __name__ == "__main__":
    main()
