"""The held-out prompts as chat messages, read the same way by evaluate.py and bench_serve.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conversations import ROLES


def first_request(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages through the first question that has no answer after it (the request the target is asked first),
    the trailing answers of a conversation answered to its end dropped."""
    while messages and messages[-1]["role"] == "assistant":
        messages = messages[:-1]
    for index, message in enumerate(messages[:-1]):
        if message["role"] == "user" and messages[index + 1]["role"] != "assistant":
            return messages[: index + 1]
    return messages


def load_prompts(path: Path) -> list[list[dict[str, str]]]:
    """Chat messages per prompt from {"prompt": text} rows or conversations (generate.py's format, "messages",
    ShareGPT turns), up to its first question without an answer: prompt_split.py writes a conversation's questions
    alone (the target answers each in turn), and a drafter is measured on one request per prompt, the first."""
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
        messages = first_request(messages)
        if not messages or any(m["role"] == "?" or not isinstance(m["content"], str) for m in messages):
            raise SystemExit(f'{path}:{number}: expected {{"prompt": text}} or chat turns with known roles and text')
        prompts.append(messages)
    if not prompts:
        raise SystemExit(f"{path} holds no prompts")
    return prompts
