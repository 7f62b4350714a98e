"""Hidden states fetched while the drafter trains (train.py --online), so that a data set larger than the disk trains.

A sample with only a token file (extract.py --offline-samples) has no hidden states on disk. Ahead of the step
that reads it, its hidden states are asked of a vLLM server started with the extract_hidden_states method
(extract_vllm.VllmBackend, the extraction backend's own server and checks), moved into the staged data directory
as `hs_<row>.safetensors`, read by the step through speculators' dataset like any other sample, and deleted as soon
as the step has read them. The samples fetched or held at once come to at most `window` sequences of `max_len`
tokens (the disk bound the plan states: hidden_states_file.online_bound_bytes); a step's batch holds at most
max_len tokens, so the step's own samples always fit. `concurrency` requests are in flight, so the trainer rarely
waits.

A server that dies (a kill, an out-of-memory) is started again and the request repeated; a sample whose hidden
states do not match its token ids stops training with the reason. Counts per epoch (samples fetched, bytes
written and deleted, the high-water mark of bytes held) go to `online_summary.json` and a progress line.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import progress
from extract_plan import Sample
from try_again import Tries

SUMMARY = "online_summary.json"
FETCH_TRIES = 3  # a request that fails this often, with the server restarted between tries, stops training


class Server(Protocol):
    def fetch_file(self, sample: Sample) -> Path: ...

    def revive(self) -> bool: ...


@dataclass
class EpochCounts:
    epoch: int
    fetched: int = 0
    bytes_written: int = 0
    bytes_deleted: int = 0
    high_water_bytes: int = 0


@dataclass
class OnlineSummary:
    window: int
    bound_bytes: int
    epochs: list[EpochCounts] = field(default_factory=list)
    # Who fetched: "eyas" (this module, with the counts per epoch) or "speculators" (its own dataset on CUDA, which
    # counts nothing eyas can read; `gpus` x `workers` dataloader workers fetched, one sample at a time each).
    trainer: str = "eyas"
    gpus: int | None = None
    workers: int | None = None

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, window: int, bound_bytes: int) -> OnlineSummary:
        """The summary a killed run left (its finished epochs), or a new one."""
        if not path.exists():
            return cls(window, bound_bytes)
        data = json.loads(path.read_text())
        return cls(window, bound_bytes, [EpochCounts(**epoch) for epoch in data.get("epochs", [])])


class OnlineHiddenStates:
    """Fetches the hidden states of the `online` rows into `directory` (hs_<row>.safetensors) from `server`."""

    def __init__(
        self,
        server: Server,
        directory: Path,
        online: dict[int, int],
        sample: Callable[[int], Sample],
        *,
        window: int,
        max_len: int,
        concurrency: int,
        summary: OnlineSummary,
        summary_path: Path,
    ) -> None:
        self.server = server
        self.directory = directory
        self.online = online  # row -> its tokens
        self.sample = sample
        self.budget = window * max_len  # tokens whose hidden states may be on disk at once
        self.pool = ThreadPoolExecutor(max(1, concurrency))
        self.summary = summary
        self.summary_path = summary_path
        self.lock = threading.Lock()
        self.held = 0
        self.counts = EpochCounts(epoch=-1)
        for row in online:  # a killed run's fetched files: not counted, and not trusted to be the newest
            (directory / f"hs_{row}.safetensors").unlink(missing_ok=True)

    def stream(
        self,
        batches: list[list[int]],
        read: Callable[[list[int]], Any],
        rows: Callable[[list[int]], list[int]] = list,
    ) -> Iterator[Any]:
        """`read(batch)` for each batch in order, each batch's online rows (`rows(batch)`: the staged files it reads,
        by default the batch itself) fetched beforehand, at most `window` ahead, and deleted once read. Leaving early
        cancels the rest and deletes what was fetched."""
        files = [rows(batch) for batch in batches]
        order = [row for batch in files for row in batch if row in self.online]
        pending: dict[int, Future[int]] = {}
        position = 0

        def top_up(needed: frozenset[int] = frozenset()) -> None:
            """Submit in order while the budget allows, and in any case the `needed` rows (the next step's)."""
            nonlocal position
            while position < len(order):
                row = order[position]
                tokens = sum(self.online[other] for other in pending)
                if row not in needed and pending and tokens + self.online[row] > self.budget:
                    return
                pending[row] = self.pool.submit(self._fetch, row)
                position += 1

        try:
            for batch, batch_rows in zip(batches, files, strict=True):
                top_up(frozenset(batch_rows))
                for row in batch_rows:
                    if row in self.online:
                        pending[row].result()  # a refused sample raises here, before the step reads anything
                value = read(batch)
                for row in batch_rows:
                    if row in pending:
                        pending.pop(row)
                        self._delete(row)
                top_up()
                yield value
        finally:
            for future in pending.values():
                future.cancel()
            for row, future in pending.items():
                if not future.cancelled():
                    future.exception()  # wait for it to land, then delete it
                    self._delete(row)

    def begin_epoch(self, epoch: int) -> None:
        done = [counts for counts in self.summary.epochs if counts.epoch == epoch]
        self.counts = done[0] if done else EpochCounts(epoch=epoch)

    def end_epoch(self) -> None:
        """Record the epoch's counts (replacing a resumed epoch's earlier ones) and report them."""
        self.summary.epochs = [counts for counts in self.summary.epochs if counts.epoch != self.counts.epoch]
        self.summary.epochs.append(self.counts)
        self.summary.save(self.summary_path)
        progress.emit(phase="online", bound_bytes=self.summary.bound_bytes, **asdict(self.counts))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def _fetch(self, row: int) -> int:
        sample = self.sample(row)
        tries = Tries(FETCH_TRIES)
        while True:
            try:
                staged = self.server.fetch_file(sample)
                break
            except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out: the server died?
                if not tries.again(error):
                    raise RuntimeError(
                        f"the extraction server failed sample {sample.sample_id} {FETCH_TRIES} times ({error}); "
                        "its log is in the work directory. Rerun train.py to resume from the newest checkpoint."
                    ) from error
                self.server.revive()
        target = self.directory / f"hs_{row}.safetensors"
        os.replace(staged, target)  # the same filesystem: the server's staging directory is beside it
        size = target.stat().st_size
        with self.lock:
            self.held += size
            self.counts.fetched += 1
            self.counts.bytes_written += size
            self.counts.high_water_bytes = max(self.counts.high_water_bytes, self.held)
        return size

    def _delete(self, row: int) -> None:
        path = self.directory / f"hs_{row}.safetensors"
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return
        with self.lock:
            self.held -= size
            self.counts.bytes_deleted += size
