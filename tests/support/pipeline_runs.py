"""Driving `eyas` as a real process against the embedded target, and reading what a run left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from eyas.tools.target.embedded import EmbeddedTarget

EYAS = str(Path(sys.executable).parent / "eyas")
# Small enough for 2 cores: a data phase of a few dozen seconds. Every run of the session plans at these shapes
# (max_seq_len, draft vocabulary, TTT steps, and the prompt source, whose length sets the probe's sample length; a
# config's runs too, whose defaults differ), so the host's speed probe measures once and the rest read its cache.
# No `vllm bench serve` and no n-gram server in the evaluation (a minute or more each per run on 2 cores):
# the ceiling test (test_drafter_e2e) runs both inside evaluate.py, test_vllm_bench_serve the bench alone.
TINY = ["--samples", "24", "--max-tokens", "48", "--max-seq-len", "256", "--concurrency", "4",
        "--draft-vocab-size", "2048", "--epochs", "1", "--ttt-steps", "1", "--prompts", "sharegpt",
        "--bench-prompts", "0", "--no-eval-ngram", "--eval-k-from", "3", "--poll-interval", "0.2"]  # fmt: skip


def without_flags(argv: list[str], *dropped: str) -> list[str]:
    """`argv` (flags with values, and switches such as --no-eval-ngram) without the flags named, each with its value."""
    kept: list[str] = []
    at = 0
    while at < len(argv):
        takes_value = at + 1 < len(argv) and not argv[at + 1].startswith("--")
        width = 2 if takes_value else 1
        if argv[at] not in dropped:
            kept += argv[at : at + width]
        at += width
    return kept


def environment(target: EmbeddedTarget, runs: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EYAS_CACHE_DIR": str(target.cache_dir),
        "EYAS_TARGET_PORT": str(target.port),
        "EYAS_RUNS_DIR": str(runs),
        # Wide enough that rich never wraps a message the tests look for.
        "COLUMNS": "400",
    }


def start(target: EmbeddedTarget, runs: Path, *args: str) -> subprocess.Popen[str]:
    """Start `eyas ARGS` with stdin closed (so gates never ask here) in its own process group."""
    return subprocess.Popen(
        [EYAS, *args],
        env=environment(target, runs),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def eyas(target: EmbeddedTarget, runs: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EYAS, *args], env=environment(target, runs), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "transcript.jsonl"
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the line being written right now
    return found


def node_started(run_dir: Path, node: str) -> bool:
    return any(e["kind"] == "node" and e["node"] == node and e["phase"] == "start" for e in events(run_dir))


def sleeps_in(run_dir: Path, task: str) -> int:
    return sum(1 for e in events(run_dir) if e["kind"] == "clock" and e.get("op") == "sleep" and e["task"] == task)


def run_started(runs: Path) -> bool:
    """A run folder holds its run.json: the folder itself appears a moment before it (on a loaded machine, long
    enough for a test that looked only for the folder to find no run)."""
    return runs.exists() and any((path / "run.json").exists() for path in runs.iterdir())


def only_run(runs: Path) -> Path:
    found = [path for path in runs.iterdir() if (path / "run.json").exists()]
    assert len(found) == 1, found
    return found[0]


def job_dir(target: EmbeddedTarget, run_id: str, job: str) -> Path:
    return target.workdir / "jobs" / f"{run_id}.{job}"


def launches(target: EmbeddedTarget, run_id: str, job: str) -> int:
    """How many times a job's wrapper started its program: each start logs one line."""
    log = job_dir(target, run_id, job) / "log"
    return sum(1 for line in log.read_text().splitlines() if line.startswith("eyas: started "))


def conversation_ids(target: EmbeddedTarget, run_id: str) -> list[str]:
    path = target.workdir / "runs" / run_id / "data" / "conversations.jsonl"
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def write_policy(path: Path, **fields: Any) -> Path:
    path.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items()))
    return path
