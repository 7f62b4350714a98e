"""How long the front door takes: `eyas --version`, `eyas --help` and a command's own `--help`, and the commands an
operator runs every few seconds under `watch` (`eyas status RUN`, `eyas runs`, `eyas jobs`) on a runs folder like an
operator's (the recorded examples, and a run at its data gate whose two jobs ran here), against the bare interpreter
starting, measured side by side in one run (medians of 9 runs each, interleaved so that a busy moment hits every
command alike). Beside them, what `eyas status` paid before it read checkpoints itself: LangGraph reading the same
run. The goal is that each eyas command answers in under 0.5 s: the ratio to the bare interpreter says how much of
that eyas itself spends, whatever the machine."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from gated_runs import run_with_jobs

RUNS = 9
GOAL_S = 0.5
EYAS = str(Path(sys.executable).with_name("eyas"))
EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"
RUN = "gated"
LANGGRAPH_READ = (
    "from eyas.graph.life.runner import graph_state; from eyas.graph.runs import run_dir; "
    f"graph_state(run_dir({RUN!r}))"
)
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "eyas --version": [EYAS, "--version"],
    "eyas --help": [EYAS, "--help"],
    "eyas run --help": [EYAS, "run", "--help"],
    "eyas status RUN": [EYAS, "status", RUN],
    "eyas runs": [EYAS, "runs"],
    "eyas jobs": [EYAS, "jobs"],
    "LangGraph reads RUN": [sys.executable, "-c", LANGGRAPH_READ],
}


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copytree(EXAMPLES, root / "runs")
        run_with_jobs(root, RUN, [f"{RUN}.generate-0", f"{RUN}.generate-1"])
        env = {
            **os.environ,
            "COLUMNS": "100",
            "EYAS_RUNS_DIR": str(root / "runs"),
            "EYAS_CACHE_DIR": str(root / "cache"),
        }
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for argv in COMMANDS.values():  # once each first, so no figure pays for a cold file cache
            wall(argv, env)
        for _ in range(RUNS):
            for name, argv in COMMANDS.items():
                times[name].append(wall(argv, env))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<20} {'median s':>9} {'x python':>9}  goal")
    for name, seen in times.items():
        median = statistics.median(seen)
        verdict = "" if not name.startswith("eyas") else ("under 0.5 s" if median < GOAL_S else "OVER 0.5 s")
        print(f"{name:<20} {median:>9.3f} {median / base:>9.1f}  {verdict}")


if __name__ == "__main__":
    main()
