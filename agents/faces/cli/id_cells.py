"""Run and job ids in a terminal's tables. Ids made alike share their start ("run-20261207-1530...") and differ at
their end (the time's seconds and a hex, a job's phase), so a narrow terminal cuts a long id in its middle and
keeps its end whole, on one line; a pipe or a file gets every id whole (console.py widens the table for them)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

ID_SHARE = 0.3  # of the terminal's width, the most an id column takes beside a few short columns
MIN_ID_WIDTH = 16  # an id column never narrower: enough for "run-2…153012-ab12"'s distinguishing end
ELLIPSIS = "…"


def middle_cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: its start, "…", and its end, which gets the larger part."""
    if len(text) <= limit:
        return text
    head = max(1, (limit - 1) // 4)
    return text[:head] + ELLIPSIS + text[len(text) - (limit - 1 - head) :]


def shown_ids(ids: list[str], console: Console, share: float = ID_SHARE) -> list[str]:
    """The ids as the table shows them on `console`: whole unless a terminal is too narrow for them (they may take
    `share` of its width)."""
    if not console.is_terminal:
        return ids
    limit = max(MIN_ID_WIDTH, int(console.width * share))
    return [middle_cut(one, limit) for one in ids]


def add_id_column(table: Table, header: str, shown: list[str]) -> None:
    """A column as wide as its longest id as shown, never wrapped: each id stays on its row's first line."""
    table.add_column(header, no_wrap=True, min_width=max((len(one) for one in shown), default=len(header)))
