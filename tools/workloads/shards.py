"""A workload's share of the work when N processes split it: `--shard I/N` (shard I of N, from 0)."""

from __future__ import annotations

import argparse
import hashlib

Shard = tuple[int, int]
WHOLE: Shard = (0, 1)


def parse_shard(text: str) -> Shard:
    """`I/N` as (I, N); argparse's `type=`, so a bad value is a usage error naming the flag's form."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"takes I/N with 0 <= I < N, e.g. 0/2, not {text!r}")
    return int(index), int(count)


def suffix(shard: Shard) -> str:
    """A name suffix for what one shard writes beside the others (empty for the whole work)."""
    return "" if shard == WHOLE else f".shard-{shard[0]}-of-{shard[1]}"


def shard_of(sample_id: str, shards: int) -> int:
    """The shard a sample belongs to: a hash of its id, so every process (and every run) agrees."""
    return int.from_bytes(hashlib.sha256(sample_id.encode()).digest()[:8], "big") % shards
