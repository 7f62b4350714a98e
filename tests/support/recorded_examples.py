"""The runs recorded under runs/examples/ and whether they still match the workload scripts they were recorded with."""

from __future__ import annotations

import json
from pathlib import Path

from eyas.tools.jobs.upload import LISTING, changed_scripts

EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"


def recorded_examples() -> list[str]:
    return sorted(p.parent.name for p in EXAMPLES.glob("*/transcript.jsonl"))


def stale_workloads(transcript: Path) -> list[str]:
    """The workload scripts the recorded run did not find on its host as they are now (its upload's listing):
    a replay of such a recording diverges at the upload, and only `make examples` can fix it."""
    for line in transcript.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "command" and LISTING in event.get("command", ""):
            return [path.name for path in changed_scripts(event["stdout"])]
    return []
