"""vocab.py: frequencies over loss-masked tokens, and d2t/t2d exactly as speculators builds and loads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extraction import CONVERSATIONS, extract, prepared_target, run_python, summary, write_sample_file
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads import prompt_split

pytestmark = pytest.mark.slow  # runs with the target environment's Python (numpy, torch)

# Masked: 3 x3, 1 x2, 7 x2, 8 x1, 9 x1. Unmasked tokens (5 four times, 1, 7) must not count: counted, 5 would win.
CORPUS = [
    ([5, 3, 3, 7, 5, 1], [False, True, True, True, False, True]),
    ([5, 5, 1, 3, 8, 9, 7, 7, 1], [False, False, False, True, True, True, True, False, True]),
]

READ = """
import json, sys, numpy as np, torch
out, n = sys.argv[1], sys.argv[2]
d2t, t2d = np.load(f"{out}/d2t-{n}.npy"), np.load(f"{out}/t2d-{n}.npy")
freq = torch.load(f"{out}/token_freq.pt", weights_only=True)
from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution
theirs_d2t, theirs_t2d = build_vocab_mappings_from_distribution(freq, int(n), len(t2d))
print(json.dumps({
    "d2t": d2t.tolist(), "d2t_dtype": str(d2t.dtype), "t2d": np.flatnonzero(t2d).tolist(), "t2d_len": len(t2d),
    "t2d_dtype": str(t2d.dtype), "freq": {str(k): v for k, v in freq.items()},
    "same_as_speculators": bool(np.array_equal(theirs_d2t.numpy(), d2t) and np.array_equal(theirs_t2d.numpy(), t2d)),
}))
"""


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


def vocab(target: EmbeddedTarget, *args: str | Path) -> Any:
    return run_python(target, WORKLOADS_DIR / "vocab.py", *args)


def mapping(target: EmbeddedTarget, out: Path, size: int) -> dict[str, Any]:
    done = run_python(target, "-c", READ, out, str(size))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def token_ids(target: EmbeddedTarget, *words: str) -> list[list[int]]:
    """The target tokenizer's ids of each word (in the target venv, which has transformers)."""
    script = (
        "import json, sys; from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "print(json.dumps([t(w, add_special_tokens=False)['input_ids'] for w in sys.argv[2:]]))"
    )
    done = run_python(target, "-c", script, target.model_dir, *words)
    assert done.returncode == 0, done.stderr[-2000:]
    ids: list[list[int]] = json.loads(done.stdout)
    return ids


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "hs"
    directory.mkdir()
    for index, (ids, mask) in enumerate(CORPUS):
        write_sample_file(directory / f"hs_{index}.safetensors", ids, mask)
    return directory


def test_a_known_corpus_gives_the_expected_mapping(target: EmbeddedTarget, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "vocab"
    result = summary(
        vocab(target, "--hidden-states", corpus, "--target-vocab-size", "10", "--draft-vocab-size", "4", "--out", out)
    )
    # 3 first, then 1 and 7 (tied, lower id first), then 8 over 9 (tied): draft ids 0..3 -> target 1, 3, 7, 8.
    got = mapping(target, out, 4)
    assert got["d2t"] == [1, 2, 5, 5] and got["d2t_dtype"] == "int64"
    assert got["t2d"] == [1, 3, 7, 8] and got["t2d_len"] == 10 and got["t2d_dtype"] == "bool"
    assert got["freq"] == {"1": 2, "3": 3, "7": 2, "8": 1, "9": 1}
    assert got["same_as_speculators"]
    assert result["loss_tokens"] == 9 and result["distinct_tokens"] == 5 and result["filled"] == 0
    assert result["coverage"] == round(8 / 9, 6) and result["samples"] == 2


def test_fewer_distinct_tokens_than_the_size_fills_in_the_lowest_unseen_ids(
    target: EmbeddedTarget, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "vocab"
    done = vocab(
        target, "--hidden-states", corpus, "--target-vocab-size", "10", "--draft-vocab-size", "7", "--out", out
    )
    result = summary(done)
    got = mapping(target, out, 7)
    assert got["t2d"] == [0, 1, 2, 3, 7, 8, 9]  # the five seen, then 0 and 2
    assert got["d2t"] == [0, 0, 0, 0, 3, 3, 3] and got["same_as_speculators"]
    assert result["filled"] == 2 and result["coverage"] == 1.0
    assert "only 5 distinct tokens seen; 2 unseen ids filled in" in done.stderr


def test_impossible_inputs_are_refused_with_the_fix(target: EmbeddedTarget, corpus: Path, tmp_path: Path) -> None:
    too_big = vocab(
        target, "--hidden-states", corpus, "--target-vocab-size", "10", "--draft-vocab-size", "11", "--out", tmp_path
    )
    assert too_big.returncode == 1 and "between 1 and the target's 10" in too_big.stderr
    small_vocab = vocab(
        target, "--hidden-states", corpus, "--target-vocab-size", "8", "--draft-vocab-size", "2", "--out", tmp_path
    )
    assert small_vocab.returncode == 1 and "another model than --model" in small_vocab.stderr
    write_sample_file(corpus / "hs_2.safetensors", [1, 2], None)
    unmasked = vocab(
        target, "--hidden-states", corpus, "--target-vocab-size", "10", "--draft-vocab-size", "2", "--out", tmp_path
    )
    assert unmasked.returncode == 1 and "has no loss_mask" in unmasked.stderr and "--input" in unmasked.stderr


def test_counting_extracted_files_equals_counting_the_conversations(target: EmbeddedTarget, tmp_path: Path) -> None:
    summary(extract(target, CONVERSATIONS, tmp_path / "hs"))
    model = ["--model", str(target.model_dir), "--draft-vocab-size", "32"]
    from_files = summary(vocab(target, "--hidden-states", tmp_path / "hs", *model, "--out", tmp_path / "a"))
    from_jsonl = summary(vocab(target, "--input", CONVERSATIONS, *model, "--out", tmp_path / "b"))
    assert from_files["loss_tokens"] == from_jsonl["loss_tokens"] > 0
    assert from_files["target_vocab_size"] == 49152
    for name in ("d2t-32.npy", "t2d-32.npy"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert mapping(target, tmp_path / "a", 32)["same_as_speculators"]


def test_slots_the_answers_leave_empty_go_to_the_prompt_sources_most_frequent_training_side_tokens(
    target: EmbeddedTarget, corpus: Path, tmp_path: Path
) -> None:
    """A small run's answers see few distinct tokens; the rest of the vocabulary follows the prompt source's own
    text, never a held-out row's (which would let the held-out answers shape what is measured on them)."""
    held = next(f"row-{i}" for i in range(1000) if prompt_split.is_held_out(f"row-{i}", prompt_split.HELD_OUT_PERCENT))
    kept = next(
        f"row-{i}" for i in range(1000) if not prompt_split.is_held_out(f"row-{i}", prompt_split.HELD_OUT_PERCENT)
    )
    rows = [
        {
            "id": kept,
            "conversations": [{"from": "human", "value": " ocean"}, {"from": "gpt", "value": " ocean forest"}],
        },
        {"id": held, "prompt": " volcano" * 50},  # far the most frequent, but held out
        {"id": kept + "_1", "prompt": " ocean"},
    ]
    source = tmp_path / "prompts.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "vocab"
    done = vocab(
        target, "--hidden-states", corpus, "--model", target.model_dir, "--draft-vocab-size", "7", "--out", out,
        "--fill-from", source,
    )  # fmt: skip
    result = summary(done)
    ocean, forest, volcano = token_ids(target, " ocean", " forest", " volcano")
    assert len(ocean) == len(forest) == 1, "the test needs one-token words"
    # The five counted, then " ocean" (3 times) and " forest" (once); " volcano" only in the held-out row.
    assert mapping(target, out, 7)["t2d"] == sorted([1, 3, 7, 8, 9, ocean[0], forest[0]])
    assert not set(volcano) & set(mapping(target, out, 7)["t2d"])
    assert (result["from_source"], result["filled"]) == (2, 0)
    assert "5 distinct tokens seen; the other 2 chosen by their frequency in" in done.stderr
