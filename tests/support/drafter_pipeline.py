"""The drafter pipeline on the embedded target, as the drafter tests and benchmark run it: the target answers
training prompts (generate.py), then extract.py (hf), vocab.py, train.py (CPU) and evaluate.py, each a real
process of the target environment. Every phase's wall time is kept, for the benchmark's report."""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget


@dataclass(frozen=True)
class Sizes:
    conversations: int  # training prompts answered by the target
    answer_tokens: int  # longest generated answer
    draft_vocab: int
    epochs: int
    total_seq_len: int  # tokens per training step
    eval_tokens: int  # tokens generated per evaluation prompt
    eval_concurrency: int
    lr: float = 1e-3


def add_size_options(parser: argparse.ArgumentParser, defaults: Sizes) -> None:
    """One --flag per size, defaulting to the benchmark's own."""
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--keep", type=Path, help="work here and keep everything (default: a temporary directory)")


def sizes_from(args: argparse.Namespace, defaults: Sizes) -> Sizes:
    return Sizes(**{name: getattr(args, name) for name in vars(defaults)})


@contextmanager
def work_root(keep: Path | None, prefix: str) -> Iterator[Path]:
    """`keep` (created) when given, else a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        root = keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        yield root


def split_prompts(target: EmbeddedTarget, root: Path, train: int, held_out: int) -> tuple[Path, Path]:
    """ShareGPT's training and held-out prompts (prompt_split.py's hash split), as the benchmarks measure on them."""
    prompts, held = root / "prompts.jsonl", root / "held_out.jsonl"
    subprocess.run(
        [
            str(target.python), str(WORKLOADS_DIR / "prompt_split.py"), "--source", "sharegpt", "--train", str(train),
            "--held-out", str(held_out), "--train-out", str(prompts), "--held-out-out", str(held),
        ],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return prompts, held


@dataclass
class Pipeline:
    target: EmbeddedTarget
    base_url: str  # a server of the target, for generate.py
    served_model: str
    root: Path
    sizes: Sizes
    port: int  # evaluate.py's servers, in turn
    prompts: Path  # training prompts; the first `sizes.conversations` are answered
    held_out: Path  # evaluation prompts, never trained on
    fill_from: str | None = None  # vocab.py --fill-from: the prompt source, as a run passes it
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self, phase: str, script: str, *args: str | Path, timeout: float = 1800) -> str:
        argv = [str(self.target.python), str(WORKLOADS_DIR / script), *(str(arg) for arg in args)]
        log = self.root / f"{phase}.log"
        started = time.monotonic()
        with log.open("w") as handle:
            done = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.monotonic() - started
        output = log.read_text(errors="replace")
        if done.returncode:
            raise AssertionError(f"{phase} exited with {done.returncode}; {log} ends:\n{output[-3000:]}")
        return output

    @property
    def hidden_states(self) -> Path:
        return self.root / "hidden_states"

    def vocab(self, name: str) -> Path:
        return self.root / "vocab" / f"{name}-{self.sizes.draft_vocab}.npy"

    def prepare_data(self) -> None:
        """Generated answers, their hidden states and the draft vocabulary."""
        generated = self.root / "generated.jsonl"
        self.run(
            "generate", "generate.py", "--input", self.prompts, "--output", generated, "--base-url", self.base_url,
            "--model", self.served_model, "--concurrency", "16", "--max-tokens", str(self.sizes.answer_tokens),
            "--temperature", "0", "--limit", str(self.sizes.conversations),
        )  # fmt: skip
        self.run(
            "extract", "extract.py", "--model", self.target.model_dir, "--input", generated, "--out", self.hidden_states
        )
        self.run(
            "vocab", "vocab.py", "--hidden-states", self.hidden_states, "--model", self.target.model_dir,
            "--draft-vocab-size", str(self.sizes.draft_vocab), "--out", self.root / "vocab",
            *(["--fill-from", self.fill_from] if self.fill_from else []),
        )  # fmt: skip

    def train(self, out: Path, *extra: str, phase: str = "train") -> str:
        return self.run(
            phase, "train.py", "--data", self.hidden_states, "--verifier", self.target.model_dir, "--out", out,
            "--d2t", self.vocab("d2t"), "--t2d", self.vocab("t2d"), "--device", "cpu",
            "--epochs", str(self.sizes.epochs), "--total-seq-len", str(self.sizes.total_seq_len),
            "--lr", str(self.sizes.lr), *extra,
        )  # fmt: skip

    def evaluate(self, drafter: Path, name: str, *extra: str) -> dict[str, Any]:
        out = self.root / f"{name}.json"
        self.run(
            name, "evaluate.py", "--model", self.target.model_dir, "--drafter", drafter, "--prompts", self.held_out,
            "--out", out, "--max-tokens", str(self.sizes.eval_tokens), "--concurrency",
            str(self.sizes.eval_concurrency), "--port", str(self.port), "--vllm-args=--enforce-eager", *extra,
        )  # fmt: skip
        return json.loads(out.read_text())
