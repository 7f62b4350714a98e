"""metrics.jsonl: one JSON row per training step and per validation pass, appended as training goes, so that a
run's curves (loss, per-position accuracy, learning rate, tokens/s) can be plotted while it runs and after.

Rows: {"split": "train"|"val", "step", "epoch", "loss", "acc": [per TTT position], ...} plus "lr" and
"tokens_per_s" where known. A resumed run rewinds the file to its checkpoint's step (`rewind`); where that
step is not known (speculators' own trainer resumes by epoch), a step may appear twice and its last row wins.

The same scalars go to TensorBoard event files in tensorboard/ beside the file (tensorboard_events.py), tagged
`<split>/loss`, `<split>/acc_<position>`, `train/lr` and `train/tokens_per_s`; each process writes a file of its own,
and a rewind marks the restart there, so that TensorBoard drops what the killed process logged after it too. When
train.py is told to track the run in MLflow or W&B, the same tags go there (tracking.py). Plain Python, imported by
the workloads from their own directory on the host.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tensorboard_events import EventFile
from tracking import Tracker, Tracking, TrackingSettings, open_tracker

FILE_NAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
PATH_ENV = "EYAS_METRICS_FILE"  # where the CUDA path's per-rank handler writes


class MetricsLog:
    def __init__(self, path: Path, tracker: Tracker | None = None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.events = EventFile(path.parent / TENSORBOARD_DIR)
        self.tracking = Tracking(tracker)

    def rewind(self, step: int) -> None:
        """Drop the rows after `step`, which a run killed after its last checkpoint wrote and will write again."""
        self.events.restart(step + 1)
        if not self.path.exists():
            return
        steps = ((line, _step(line)) for line in self.path.read_text().splitlines())
        kept = [line for line, line_step in steps if line_step is not None and line_step <= step]
        tmp = self.path.with_name(self.path.name + ".partial")
        tmp.write_text("".join(line + "\n" for line in kept))
        os.replace(tmp, self.path)

    def write(self, **row: Any) -> None:
        row.setdefault("time", round(time.time(), 3))
        with self.path.open("a") as handle:
            handle.write(json.dumps(row, separators=(",", ":")) + "\n")
        self.events.scalars(int(row["step"]), scalars(row), row["time"])
        self.tracking.log(int(row["step"]), scalars(row))

    def close(self) -> None:
        """Training is over: the tracked run (if any) is marked finished."""
        self.tracking.close()


def tracked_log(path: Path) -> MetricsLog:
    """The metrics log of a training run, tracked in MLflow or W&B too when train.py was told to (tracking.py)."""
    return MetricsLog(path, open_tracker(TrackingSettings.from_env(), path.parent))


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """A row's numbers as TensorBoard tags: the loss, each TTT position's accuracy, the rate and the throughput."""
    split = row["split"]
    tags = {f"{split}/{name}": float(row[name]) for name in ("loss", "lr", "tokens_per_s") if row.get(name) is not None}
    tags.update({f"{split}/acc_{position}": float(value) for position, value in enumerate(row.get("acc") or ())})
    return tags


def _step(line: str) -> int | None:
    """A row's step, or None for a torn last line."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None
