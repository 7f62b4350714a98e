"""Reading the JSON answer a probe script prints on a host, past any warnings printed before it."""

from __future__ import annotations

import json


def last_json(stdout: str) -> object:
    """The last line of `stdout` that parses as JSON, or None when no line does."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None
