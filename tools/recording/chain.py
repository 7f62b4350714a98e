"""The transcript's hash chain: each event carries `prev`, the hash of the event before it.

Why: replay notices a tampered event only where it changes a later request or a node's output; an edited
answer that changes nothing downstream (a reason, a recorded stdout nobody parsed) would pass. With the
chain, the first altered or removed event is named wherever it is.

What it protects against: a changed value in any event but the last, an event inserted, or events removed
(anywhere but at the end), by someone or something (a careless editor, a bad merge, a faulty disk) that does
not also rewrite the links after the change. Re-spacing the file or reordering keys changes nothing it checks.
What it does not: whoever can write the file can recompute every link (the chain holds no secret, nothing
is signed); a cut at the end of the file (the last events removed) leaves no successor to notice; and
the last event itself has no successor that vouches for it. For those, keep a copy of the file, or its
hash, somewhere the writer of the file cannot reach.

Transcripts recorded before the chain (no `prev` anywhere) are reported as unchained, not as broken.
A line cut short by a crash is not part of the chain: the events written after it link to the last
complete event, as the writer saw it when it reopened the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

HASH_CHARS = 32  # 128 bits of sha256: no accidental collision, and short enough to read in a line


def link(event: dict[str, Any]) -> str:
    """The hash the next event records as its `prev`: of the event's JSON in one canonical spelling, so a file
    re-spaced or with its keys reordered still verifies, and any changed value does not."""
    spelled = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(spelled.encode()).hexdigest()[:HASH_CHARS]


GENESIS = hashlib.sha256(b"").hexdigest()[:HASH_CHARS]  # the `prev` of a transcript's first event


@dataclass(frozen=True)
class Written:
    """One complete event as read: its line number, its own link (the hash of it), its seq and the link it
    recorded to the event before it."""

    line: int
    hash: str
    seq: int
    prev: str | None


class ChainBreak(BaseModel):
    """The first place the chain does not hold, and what happened there."""

    what: Literal["altered", "removed", "unlinked"]
    seq: int = 0  # the event named: the altered one, the one after the removal, or the one without a link
    line: int = 0
    message: str = ""


class ChainCheck(BaseModel):
    status: Literal["chained", "unchained", "partly chained", "broken", "empty"]
    events: int = 0
    unchained_before: int = 0  # events recorded before the chain began (by an eyas without it)
    first_break: ChainBreak | None = None

    @property
    def intact(self) -> bool:
        """No altered or removed event found (an unchained transcript cannot be checked, so it is intact)."""
        return self.first_break is None

    def describe(self, path: str) -> str:
        """One sentence for a person: what the chain says about this transcript."""
        if self.first_break is not None:
            return f"{path}: hash chain broken: {self.first_break.message}"
        if self.status == "unchained":
            return (
                f"{path}: unchained: recorded by an eyas without the hash chain, so an altered or removed event is "
                "found only where it changes what replay asks"
            )
        if self.status == "partly chained":
            return (
                f"{path}: the first {self.unchained_before} events are unchained (recorded before the chain); "
                f"the {self.events - self.unchained_before} after them are chained and intact"
            )
        if self.status == "empty":
            return f"{path}: no events to check"
        return f"{path}: hash chain intact over {self.events} events (the last event has no successor to vouch for it)"


def verify(written: Sequence[Written]) -> ChainCheck:
    """Check every link in file order. The chain starts at the first event that carries one; after that every
    event must carry the hash of the one before it."""
    if not written:
        return ChainCheck(status="empty")
    start = next((index for index, event in enumerate(written) if event.prev is not None), None)
    if start is None:
        return ChainCheck(status="unchained", events=len(written))
    first = written[0]
    if start == 0 and first.prev != GENESIS:
        missing = f"events #0 to #{first.seq - 1}" if first.seq > 1 else "event #0"
        cut = ChainBreak(
            what="removed", seq=first.seq, line=first.line,
            message=f"{missing if first.seq > 0 else 'the first events'} removed before event #{first.seq} "
            f"(line {first.line}): it links to an event that is no longer in the file",
        )  # fmt: skip
        return ChainCheck(status="broken", events=len(written), first_break=cut)
    for index in range(max(start, 1), len(written)):
        found = _break(written[index - 1], written[index])
        if found is not None:
            return ChainCheck(status="broken", events=len(written), unchained_before=start, first_break=found)
    return ChainCheck(status="partly chained" if start else "chained", events=len(written), unchained_before=start)


def _break(before: Written, event: Written) -> ChainBreak | None:
    if event.prev is None:
        return ChainBreak(
            what="unlinked", seq=event.seq, line=event.line,
            message=f"event #{event.seq} (line {event.line}) carries no link, though the events before it do: "
            "it was inserted or rewritten by hand",
        )  # fmt: skip
    if event.prev == before.hash:
        return None
    if event.seq != before.seq + 1:
        gap = event.seq - before.seq - 1
        missing = f"event #{before.seq + 1}" if gap == 1 else f"events #{before.seq + 1} to #{event.seq - 1}"
        if gap < 1:
            missing = f"one or more events between #{before.seq} and #{event.seq}"
        return ChainBreak(
            what="removed", seq=event.seq, line=event.line,
            message=f"{missing} removed before event #{event.seq} (line {event.line}): it links to an event "
            f"that is no longer in the file",
        )  # fmt: skip
    return ChainBreak(
        what="altered", seq=before.seq, line=before.line,
        message=f"event #{before.seq} (line {before.line}) was altered after it was written: event #{event.seq} "
        "recorded a different hash of it",
    )  # fmt: skip
