"""Two runs to compare, made from the recorded example (runs/examples/full-pipeline, read only): the first as
recorded, the second told apart by a last node output that changes its sizes, evaluation and training curves, as a
rerun with other sizes would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline"
FIRST, SECOND = "run-20261201-100000-aaaa", "run-20261201-110000-bbbb"
SECOND_SPEEDUP = 1.25  # the second run's speedup at k=3, the recorded one's is below 1
SECOND_EPOCHS = 2


def folded_output(transcript: Path, key: str) -> Any:
    """The last value a node of the recorded run returned for `key`."""
    found = None
    for line in transcript.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "node" and event["phase"] == "end" and key in (event.get("output") or {}):
            found = event["output"][key]
    return found


def make_compared_runs(runs: Path) -> tuple[str, str]:
    """The two runs in the runs folder `runs`; returns their ids."""
    for run_id in (FIRST, SECOND):
        shutil.copytree(EXAMPLE, runs / run_id)
    transcript = runs / SECOND / "transcript.jsonl"
    sizes = {**folded_output(transcript, "sizes"), "epochs": SECOND_EPOCHS}
    evaluation = {**folded_output(transcript, "evaluation"), "speedup": SECOND_SPEEDUP}
    evaluation.pop("by_k", None)
    training = folded_output(transcript, "training")
    training["train"] = [
        {**row, "loss": row["loss"] / 2, "tokens_per_s": row["tokens_per_s"] * 2} for row in training["train"]
    ]
    last = json.loads(transcript.read_text().splitlines()[-1])
    output = {"evaluation": evaluation, "training": training, "sizes": sizes}
    added = {"v": 1, "seq": last["seq"] + 1, "kind": "node", "task": "report", "t": last["t"] + 1, "node": "report",
             "phase": "end", "output": output}  # fmt: skip
    with transcript.open("a") as handle:
        handle.write(json.dumps(added) + "\n")
    return FIRST, SECOND
