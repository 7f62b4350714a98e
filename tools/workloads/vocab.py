#!/usr/bin/env python3
"""Choose the drafter's vocabulary: the target tokens it most often has to predict.

Run by the target environment's interpreter (numpy, torch; transformers when reading a JSONL):

    python vocab.py --hidden-states hidden_states/ --model MODEL_DIR --draft-vocab-size 8192 --out vocab/
    python vocab.py --input generated.jsonl --model MODEL_DIR --draft-vocab-size 8192 --out vocab/
    python vocab.py --hidden-states hidden_states/ --fill-from sharegpt ...   # rank the rest by the source

Token frequencies are counted over loss-masked tokens only (what the drafter is trained on), from the
`token_ids` and `loss_mask` of extract.py's files, or from the conversations tokenized exactly as
extract.py does. The draft vocabulary is the N most frequent ids, ties broken by the lower id, stored
in ascending id order, in speculators' format (`speculators train` finds `d2t-N.npy`/`t2d-N.npy` in its
data directory, or takes them with --d2t-path/--t2d-path):

    d2t-N.npy       int64 [N]  offsets: target_id = draft_id + d2t[draft_id]
    t2d-N.npy       bool  [V]  True for the target ids in the draft vocabulary (V: the target's vocab_size)
    token_freq.pt   {target_id: count} saved with torch.save, as speculators writes it
    vocab_summary.json  counts, coverage of the loss-masked tokens, and how many ids were filled in

When fewer than N distinct tokens were seen (a small run: 100 answers held 2,113 distinct tokens, and the 6,079
other slots of an 8,192 vocabulary went to ids nobody writes, so 9.7% of held-out answer tokens could never be
drafted), --fill-from ranks the rest by their frequency in the prompt source's own text: ShareGPT's turns (answers
included) or a file's prompts and turns, the training side of the split only (held-out rows are skipped as
prompt_split.py holds them out), up to --fill-tokens tokens. The summary says how many came from there
("from_source"). Any slots still empty are the lowest unseen ids (speculators does the same; "filled").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from target_model import add_remote_code_flag, load_tokenizer, read_config, text_fields

SUMMARY = "vocab_summary.json"
FILL_TOKENS = 2_000_000  # ShareGPT's first 2M training-side tokens: a few seconds to tokenize


def ranked(counts: np.ndarray, excluded: np.ndarray | None = None) -> np.ndarray:
    """The ids counted at least once, most frequent first, then the lower id; `excluded` ids left out."""
    seen = np.flatnonzero(counts)
    if excluded is not None:
        seen = seen[~np.isin(seen, excluded)]
    return seen[np.lexsort((seen, -counts[seen]))]


def select(counts: np.ndarray, draft_vocab_size: int, fill: np.ndarray | None = None) -> tuple[np.ndarray, int, int]:
    """The chosen target ids in ascending order; how many of them came from the `fill` counts (the prompt source's
    text) after every id of `counts`; and how many were filled in unseen."""
    chosen = ranked(counts)[:draft_vocab_size]
    from_source = 0
    if len(chosen) < draft_vocab_size and fill is not None:
        extra = ranked(fill, excluded=chosen)[: draft_vocab_size - len(chosen)]
        from_source = len(extra)
        chosen = np.concatenate([chosen, extra])
    missing = draft_vocab_size - len(chosen)
    if missing:
        unseen = np.setdiff1d(np.arange(draft_vocab_size, dtype=np.int64), chosen, assume_unique=True)
        chosen = np.concatenate([chosen, unseen[:missing]])
    return np.sort(chosen).astype(np.int64), from_source, missing


def source_texts(source: str) -> Iterator[str]:
    """The texts of a prompt source's training side: ShareGPT's turns (answers included), or a JSONL file's
    prompts and turns; rows prompt_split.py holds out are skipped, so held-out answers never shape the vocabulary."""
    from prompt_split import HELD_OUT_PERCENT, SourceError, is_held_out, jsonl_rows, sharegpt_rows

    try:
        rows = sharegpt_rows() if source == "sharegpt" else jsonl_rows(Path(source))
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                continue
            if is_held_out(row["id"], HELD_OUT_PERCENT):
                continue
            if isinstance(row.get("prompt"), str):
                yield row["prompt"]
            turns = row.get("conversations") or row.get("messages")
            for turn in turns if isinstance(turns, list) else []:
                text = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
                if isinstance(text, str):
                    yield text
    except (SourceError, OSError) as error:
        raise SystemExit(f"vocab: cannot read --fill-from {source}: {error}") from error


def source_counts(source: str, tokenizer: Any, target_vocab_size: int, budget: int) -> np.ndarray:
    """Token frequencies over the first `budget` tokens of the source's texts."""
    counts = np.zeros(target_vocab_size, dtype=np.int64)
    seen = 0
    for text in source_texts(source):
        ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < target_vocab_size)]
        counts += np.bincount(ids, minlength=target_vocab_size)
        seen += len(ids)
        if seen >= budget:
            break
    return counts


def mappings(selected: np.ndarray, target_vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    d2t = selected - np.arange(len(selected), dtype=np.int64)
    t2d = np.zeros(target_vocab_size, dtype=bool)
    t2d[selected] = True
    return d2t, t2d


def masked_tokens_from_files(directory: Path) -> Iterator[np.ndarray]:
    from safetensors import safe_open

    from hidden_states_file import training_files

    # A sample fetched online during training has a token file instead: its tokens count the same.
    files = training_files(directory)
    if not files:
        raise SystemExit(
            f"vocab: no hs_<index>.safetensors (or tok_<index>.safetensors) files in {directory}; run extract.py first."
        )
    for path in files:
        with safe_open(str(path), framework="np") as handle:
            if "loss_mask" not in handle.keys():  # noqa: SIM118 (safe_open has no __contains__)
                raise SystemExit(
                    f"vocab: {path} has no loss_mask (written by another tool?); count from the conversations "
                    "instead with --input, or re-extract with extract.py."
                )
            yield handle.get_tensor("token_ids")[handle.get_tensor("loss_mask").astype(bool)]


def masked_tokens_from_conversations(
    path: Path, model: Path, max_tokens: int, trust_remote_code: bool
) -> Iterator[np.ndarray]:
    from transformers import GenerationConfig

    from conversations import Conversation, end_of_turn_ids, read_conversations, tokenize

    tokenizer = load_tokenizer(model, trust_remote_code)
    try:
        end_ids = end_of_turn_ids(tokenizer, GenerationConfig.from_pretrained(model).eos_token_id)
    except OSError:
        end_ids = end_of_turn_ids(tokenizer, None)
    for item in read_conversations(path):
        if not isinstance(item, Conversation):
            continue
        try:
            tokenized = tokenize(tokenizer, item.messages, end_ids, max_tokens)
        except ValueError:
            continue
        ids = np.asarray(tokenized.token_ids, dtype=np.int64)
        yield ids[np.asarray(tokenized.loss_mask, dtype=bool)]


def count(batches: Iterator[np.ndarray], target_vocab_size: int) -> tuple[np.ndarray, int]:
    counts = np.zeros(target_vocab_size, dtype=np.int64)
    samples = 0
    for tokens in batches:
        if tokens.size and (tokens.min() < 0 or tokens.max() >= target_vocab_size):
            raise SystemExit(
                f"vocab: token id {int(tokens.max())} is outside the target vocabulary of {target_vocab_size}; "
                "the files were extracted with another model than --model."
            )
        counts += np.bincount(tokens, minlength=target_vocab_size)
        samples += 1
    return counts, samples


def target_vocab_size(model: Path | None, given: int | None) -> int:
    if given is not None:
        return given
    if model is None:
        raise SystemExit("vocab: pass --model (the target's directory) or --target-vocab-size.")
    return int(text_fields(read_config(model))["vocab_size"])


def _atomic(path: Path, save: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".tmp.{path.name}")  # keeps the suffix: np.save appends .npy to any other name
    save(tmp)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    vocab = target_vocab_size(args.model, args.target_vocab_size)
    if not 0 < args.draft_vocab_size <= vocab:
        raise SystemExit(f"vocab: --draft-vocab-size must be between 1 and the target's {vocab}.")
    if args.hidden_states is not None:
        batches = masked_tokens_from_files(args.hidden_states)
    else:
        batches = masked_tokens_from_conversations(args.input, args.model, args.max_tokens, args.trust_remote_code)
    counts, samples = count(batches, vocab)
    fill = None
    if args.fill_from is not None and int(np.count_nonzero(counts)) < args.draft_vocab_size:
        if args.model is None:
            raise SystemExit("vocab: --fill-from needs --model: the source's text is tokenized with the target's.")
        tokenizer = load_tokenizer(args.model, args.trust_remote_code)
        fill = source_counts(args.fill_from, tokenizer, vocab, args.fill_tokens)
    selected, from_source, filled = select(counts, args.draft_vocab_size, fill)
    d2t, t2d = mappings(selected, vocab)
    size = args.draft_vocab_size
    args.out.mkdir(parents=True, exist_ok=True)
    _atomic(args.out / f"d2t-{size}.npy", lambda tmp: np.save(tmp, d2t))
    _atomic(args.out / f"t2d-{size}.npy", lambda tmp: np.save(tmp, t2d))
    frequencies = {int(token): int(counts[token]) for token in np.flatnonzero(counts)}
    _atomic(args.out / "token_freq.pt", lambda tmp: torch.save(frequencies, tmp))
    total = int(counts.sum())
    summary = {
        "samples": samples,
        "loss_tokens": total,
        "distinct_tokens": len(frequencies),
        "draft_vocab_size": size,
        "target_vocab_size": vocab,
        "coverage": round(float(counts[selected].sum()) / total, 6) if total else None,
        "from_source": from_source,
        "filled": filled,
        "d2t": str(args.out / f"d2t-{size}.npy"),
        "t2d": str(args.out / f"t2d-{size}.npy"),
        "token_freq": str(args.out / "token_freq.pt"),
    }
    (args.out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    if from_source:
        print(
            f"vocab: {len(frequencies)} distinct tokens seen; the other {from_source} chosen by their frequency in "
            f"{args.fill_from}",
            file=sys.stderr,
        )
    if filled:
        print(f"vocab: only {len(frequencies)} distinct tokens seen; {filled} unseen ids filled in", file=sys.stderr)
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hidden-states", type=Path, help="directory of extract.py's files")
    source.add_argument("--input", type=Path, help="JSONL of conversations (needs --model for the tokenizer)")
    parser.add_argument("--model", type=Path, help="the target's directory (vocab size, tokenizer)")
    parser.add_argument("--target-vocab-size", type=int, help="instead of reading it from --model")
    parser.add_argument("--draft-vocab-size", type=int, required=True, help="N, the drafter's vocabulary size")
    parser.add_argument("--max-tokens", type=int, default=4096, help="with --input: as given to extract.py")
    parser.add_argument("--out", type=Path, required=True, help="directory for d2t-N.npy, t2d-N.npy, token_freq.pt")
    parser.add_argument(
        "--fill-from", help="`sharegpt` or a JSONL file: ranks the slots the counted tokens leave empty (needs --model)"
    )
    parser.add_argument(
        "--fill-tokens", type=int, default=FILL_TOKENS,
        help=f"tokens of --fill-from read at most (default {FILL_TOKENS:,})",
    )  # fmt: skip
    add_remote_code_flag(parser)
    args = parser.parse_args(argv)
    if args.input is not None and args.model is None:
        parser.error("--input needs --model: the conversations are tokenized with the target's tokenizer")
    return args


def main() -> None:
    print(json.dumps(run(parse_args())))


if __name__ == "__main__":
    main()
