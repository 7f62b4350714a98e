"""Text from a person or the host in the run's Markdown (the report, the drafter's model card): shown as written,
never read as markup, a link, a code span that ends early or a table's next cell."""

from __future__ import annotations

import re
from typing import Any

_MARKUP = re.compile(r"[\\`\[\]|]")
_BACKTICKS = re.compile(r"`+")


def md_text(value: Any) -> str:
    """Text from a person or the host (a gate's reason, a check's finding, a diagnosis) as Markdown that shows it
    and makes nothing of it: no HTML (a `<script>` in a reason reaches a viewer as text), no link or image, no code
    span, no cell break in a table, no new block (newlines become spaces)."""
    text = " ".join(str(value).splitlines())
    return _MARKUP.sub(lambda found: "\\" + found.group(), text).replace("<", "&lt;").replace(">", "&gt;")


def fence(text: str, least: int) -> str:
    """Backticks enough to open and close code around `text`: one more than its longest run, at least `least`."""
    return "`" * max(least, max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)


def md_code(value: str) -> str:
    """A code span that no backtick in `value` (production's argv comes from its unit) can close early."""
    text = " ".join(value.splitlines())
    ticks = fence(text, 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{ticks}{padded}{ticks}"
