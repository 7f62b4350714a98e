"""generate.py's input: each line of --input as a sample (ShareGPT conversations, messages, or {id, prompt}), its
system and user turns in order (the corpus's own answers dropped), and the samples of one shard still to generate.

A line without an id gets one from a hash of its turns, so identical prompts are generated once. A standalone module
beside generate.py on the host, imported by its plain name as the other workloads import their siblings.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shards import WHOLE, Shard, shard_of

ROLES = {"human": "user", "user": "user", "system": "system"}  # every other role is an answer, dropped


@dataclass
class Sample:
    id: str
    turns: list[dict[str, str]]  # system and user turns, in order


def parse_sample(record: Any) -> Sample:
    """One input line as a sample; raises ValueError saying what the line lacks."""
    if not isinstance(record, dict):
        raise ValueError("is not a JSON object")
    raw = record.get("conversations") or record.get("messages")
    if isinstance(raw, list):
        turns = []
        for turn in raw:
            role = ROLES.get(str(turn.get("from", turn.get("role", ""))).lower()) if isinstance(turn, dict) else None
            content = turn.get("value", turn.get("content")) if role else None
            if role and isinstance(content, str):
                turns.append({"role": role, "content": content})
    elif isinstance(record.get("prompt"), str):
        turns = [{"role": "user", "content": record["prompt"]}]
    else:
        raise ValueError("has neither 'conversations' (ShareGPT), 'messages' nor a 'prompt' string")
    if not any(turn["role"] == "user" for turn in turns):
        raise ValueError("has no user turn with text")
    sample_id = record.get("id")
    if sample_id is None:
        sample_id = "sha-" + hashlib.sha256(json.dumps(turns, sort_keys=True).encode()).hexdigest()[:20]
    return Sample(str(sample_id), turns)


@dataclass
class Plan:
    pending: list[Sample]
    total: int  # distinct samples within --limit
    already_done: int
    bad: list[dict[str, Any]]  # input lines that are not samples


def load_input(path: Path, done: set[str], limit: int | None, shard: Shard = WHOLE) -> Plan:
    """The samples still to generate. --limit counts the whole input, so the shards of one --limit together
    hold exactly the samples an unsharded run would; bad lines are reported by shard 0 only."""
    index, shards = shard
    pending, bad, seen, already, mine = [], [], set(), 0, 0
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if limit is not None and len(seen) + len(bad) >= limit:
                break
            if not line.strip():
                continue
            try:
                sample = parse_sample(json.loads(line))
            except ValueError as exc:
                bad.append({"id": f"line-{number}", "error": f"input line {number} {exc}"})
                continue
            if sample.id in seen:
                continue
            seen.add(sample.id)
            if shard_of(sample.id, shards) != index:
                continue
            mine += 1
            if sample.id in done:
                already += 1
            else:
                pending.append(sample)
    bad = bad if index == 0 else []
    return Plan(pending, mine + len(bad), already, bad)
