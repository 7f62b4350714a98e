"""The held-out prompts as chat messages, read the same way by evaluate.py and bench_serve.py."""

from __future__ import annotations

import json
from pathlib import Path

from conversations import ROLES


def load_prompts(path: Path) -> list[list[dict[str, str]]]:
    """Chat messages per prompt from {"prompt": text} rows or conversations (generate.py's format, "messages",
    ShareGPT turns); a conversation's trailing answers are dropped, since they are what gets regenerated."""
    prompts = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if isinstance(row.get("prompt"), str):
            prompts.append([{"role": "user", "content": row["prompt"]}])
            continue
        turns = row.get("conversations") or row.get("messages") or []
        messages = [
            {
                "role": ROLES.get(turn.get("role", turn.get("from")), "?"),
                "content": turn.get("content", turn.get("value")),
            }
            for turn in turns
        ]
        while messages and messages[-1]["role"] == "assistant":
            messages.pop()
        if not messages or any(m["role"] == "?" or not isinstance(m["content"], str) for m in messages):
            raise SystemExit(f'{path}:{number}: expected {{"prompt": text}} or chat turns with known roles and text')
        prompts.append(messages)
    if not prompts:
        raise SystemExit(f"{path} holds no prompts")
    return prompts
