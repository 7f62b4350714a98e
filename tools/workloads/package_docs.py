#!/usr/bin/env python3
"""Search the documentation that came with the installed Python packages, and any text files, for a query.

Research without internet still has sources: every installed distribution carries its README as the long
description in its METADATA, for exactly the version installed. Run by the interpreter whose packages to
search (the target environment's, for vllm and speculators):

    python package_docs.py --query "eagle3 speculative decoding" --max 5
    python package_docs.py --query "hidden states" --no-packages --path DESIGN.md --path notes.md

Passages (paragraphs of up to ~900 characters) are ranked by how many query words they contain, and how
often; a passage in a package named by the query ranks higher. Output (stdout), best first:
[{"title": "speculators 0.9.0 (README)", "url": "file:///.../METADATA", "snippet": "...", "score": 7.5}]
Exit 0 (an empty list when nothing matched), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path

PASSAGE_CHARS = 900
_STOP_WORDS = """the and for with from that this what which how are was were into about using use when does can
its than then there their them they will would should could have has had not but all any some more most other"""
_STOP = frozenset(_STOP_WORDS.split())


def terms(query: str) -> list[str]:
    words = re.findall(r"[a-z0-9][a-z0-9_.+-]*[a-z0-9]", query.lower())
    return sorted({word for word in words if len(word) >= 3 and word not in _STOP})


def passages(text: str) -> Iterator[str]:
    """Paragraphs, short neighbours merged, long ones cut, so each passage reads on its own."""
    current = ""
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block:
            continue
        if current and len(current) + len(block) > PASSAGE_CHARS:
            yield current
            current = ""
        current = f"{current}\n\n{block}" if current else block
        while len(current) > PASSAGE_CHARS:
            yield current[:PASSAGE_CHARS]
            current = current[PASSAGE_CHARS:]
    if current:
        yield current


def score(passage: str, words: list[str], boost: float) -> float:
    lower = passage.lower()
    counts = [lower.count(word) for word in words]
    matched = sum(1 for count in counts if count)
    if not matched:
        return 0.0
    return round(boost * (2.0 * matched + sum(math.log1p(count) for count in counts)), 3)


def documents(include_packages: bool, paths: list[Path]) -> Iterator[tuple[str, str, str, str]]:
    """(title, url, name, text) of every document to search."""
    if include_packages:
        seen = set()
        for dist in metadata.distributions():
            name = dist.metadata.get("Name") or ""
            if not name or name.lower() in seen:
                continue
            seen.add(name.lower())
            body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
            summary = dist.metadata.get("Summary") or ""
            where = getattr(dist, "_path", None)
            url = f"file://{Path(str(where)) / 'METADATA'}" if where else f"pypi:{name}"
            yield f"{name} {dist.version} (README)", url, name.lower(), f"{summary}\n\n{body}"
    for path in paths:
        try:
            yield path.name, f"file://{path.resolve()}", path.stem.lower(), path.read_text(errors="replace")
        except OSError as exc:
            print(f"skipped {path}: {exc.strerror}", file=sys.stderr)


def search(query: str, limit: int, include_packages: bool, paths: list[Path]) -> list[dict[str, object]]:
    words = terms(query)
    hits = []
    for title, url, name, text in documents(include_packages, paths):
        boost = 2.0 if any(word in name or name in word for word in words) else 1.0
        best = max(((score(p, words, boost), p) for p in passages(text)), default=(0.0, ""))
        if best[0] > 0:
            hits.append({"title": title, "url": url, "snippet": best[1].strip(), "score": best[0]})
    return sorted(hits, key=lambda hit: (-float(hit["score"]), str(hit["title"])))[:limit]  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--query", required=True, help="what to look for, in words")
    parser.add_argument("--max", type=int, default=5, help="how many passages (one per document, best first)")
    parser.add_argument("--path", type=Path, action="append", default=[], help="a text or markdown file to search")
    parser.add_argument("--no-packages", action="store_true", help="search only the --path files")
    args = parser.parse_args()
    if not terms(args.query):
        parser.error(f"the query {args.query!r} has no word of 3+ letters to search for")
    sys.stdout.write(json.dumps(search(args.query, args.max, not args.no_packages, args.path)) + "\n")


if __name__ == "__main__":
    main()
