"""Prompts live in prompts/ as files a reviewer reads first; `$name` placeholders are filled here."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template

# Characters per token, on the low side for English and code, so an estimate rarely undercounts.
CHARS_PER_TOKEN = 3.0


@cache
def _template(name: str) -> Template:
    return Template(resources.files("eyas.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8"))


def prompt(name: str, **values: object) -> str:
    """prompts/<name>.md with its placeholders filled; a missing value is an error, not a silent gap."""
    return _template(name).substitute({key: str(value) for key, value in values.items()}).strip()


def tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def fit(texts: list[str], budget_chars: int, floor: int = 80) -> list[str]:
    """Cut `texts` so together they fit `budget_chars`: the longest give way first, none below `floor`."""
    remaining, count = budget_chars, len(texts)
    for position, length in enumerate(sorted(len(text) for text in texts)):
        share = remaining // (count - position)
        if length > share:
            cap = max(floor, share)
            return [text if len(text) <= cap else text[: cap - 1].rstrip() + "…" for text in texts]
        remaining -= length
    return texts
