"""How long the front door takes: `eyas --version`, `eyas --help` and a command's own `--help`, against the bare
interpreter starting, measured side by side in one run (medians of 9 runs each, interleaved so that a busy moment
hits every command alike). The goal is that `--version` and `--help` answer in under 0.5 s: the ratio to the bare
interpreter says how much of that eyas itself spends, whatever the machine."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 9
GOAL_S = 0.5
EYAS = str(Path(sys.executable).with_name("eyas"))
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "eyas --version": [EYAS, "--version"],
    "eyas --help": [EYAS, "--help"],
    "eyas run --help": [EYAS, "run", "--help"],
}


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "100"})
    return time.perf_counter() - started


def main() -> None:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():  # once each first, so no figure pays for a cold file cache
        wall(argv)
    for _ in range(RUNS):
        for name, argv in COMMANDS.items():
            times[name].append(wall(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<18} {'median s':>9} {'x python':>9}  goal")
    for name, seen in times.items():
        median = statistics.median(seen)
        verdict = "" if name.startswith("python") else ("under 0.5 s" if median < GOAL_S else "OVER 0.5 s")
        print(f"{name:<18} {median:>9.3f} {median / base:>9.1f}  {verdict}")


if __name__ == "__main__":
    main()
