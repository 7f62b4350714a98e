"""Benchmark: the planner's accuracy on the demo, predicted against actual time per phase, and the demo's time.

Runs `eyas demo` as a user does (the embedded target, its sizes, the auto-approve policy) into a scratch runs
folder, then reads the run's record: the plan's hours per phase (made before anything ran, from the throughput
probe and the host speed probe) against the time each phase's nodes took. A ratio of predicted over actual
between 0.67 and 1.5 is the aim for every phase. Also prints the demo's set-up and pipeline wall times.

    .venv/bin/python tests/bench/bench_plan.py [--run DIR]   (DIR: read a finished run instead of running one)

Needs the target venv and model (`make target`); about 15 minutes on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eyas.agents.faces.report_html.plan_accuracy import format_minutes, format_ratio, phase_times
from eyas.agents.faces.report_html.record import load_record

AIM = (0.67, 1.5)


def run_demo(runs: Path) -> tuple[Path, float]:
    env = {**os.environ, "EYAS_RUNS_DIR": str(runs)}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "eyas", "demo"], env=env, check=True, stdin=subprocess.DEVNULL)
    (run,) = [path for path in runs.iterdir() if (path / "transcript.jsonl").exists()]
    return run, time.monotonic() - started


def report(run: Path) -> None:
    record = load_record(run)
    print(f"run {record.run_id}: sizes {record.state.get('sizes')}")
    sources = (record.state.get("plan") or {}).get("sources") or {}
    for name in ("throughput", "extraction", "training"):
        if name in sources:
            print(f"  {name}: {sources[name]}")
    print(f"{'phase':<10}{'planned':>12}{'took':>12}{'planned/took':>14}  within {AIM[0]}-{AIM[1]}")
    for timing in phase_times(record):
        ratio = timing.ratio
        within = "-" if ratio is None else ("yes" if AIM[0] <= ratio <= AIM[1] else "NO")
        print(
            f"{timing.phase:<10}{format_minutes(timing.planned_s):>12}{format_minutes(timing.actual_s):>12}"
            f"{format_ratio(ratio):>14}  {within}"
        )
    if record.started is not None and record.ended is not None:
        print(f"pipeline (first node to last): {(record.ended - record.started) / 60:.1f} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="a finished run's folder to read instead of running the demo")
    args = parser.parse_args()
    if args.run:
        report(args.run)
        return
    with tempfile.TemporaryDirectory(prefix="eyas-bench-plan-") as scratch:
        run, seconds = run_demo(Path(scratch))
        report(run)
        print(f"eyas demo, start to end (set-up included): {seconds / 60:.1f} min")


if __name__ == "__main__":
    main()
