"""Run folders: runs/<run_id>/ holds the checkpoint DB, the transcript, answers to gates and the report."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eyas.graph.state import GateAnswer
from eyas.tools.errors import EyasError


def runs_root() -> Path:
    """EYAS_RUNS_DIR, else ./runs (the repository's runs/ when run from a checkout)."""
    return Path(os.environ.get("EYAS_RUNS_DIR", "runs")).resolve()


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints.sqlite"

    @property
    def transcript(self) -> Path:
        return self.root / "transcript.jsonl"

    @property
    def meta_path(self) -> Path:
        return self.root / "run.json"

    @property
    def answers(self) -> Path:
        return self.root / "answers.jsonl"

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    def meta(self) -> dict[str, Any]:
        return json.loads(self.meta_path.read_text())

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2))
        tmp.replace(self.meta_path)

    def record_answer(self, gate_id: str, answer: GateAnswer) -> None:
        """Append an answer to a pending gate (from `eyas approve` in another terminal)."""
        with self.answers.open("a") as f:
            f.write(json.dumps({"gate_id": gate_id, **answer.model_dump(exclude_none=True)}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def answer_for(self, gate_id: str) -> GateAnswer | None:
        """The last answer recorded for the gate, checked: another process wrote it."""
        if not self.answers.exists():
            return None
        found = None
        for line in self.answers.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a crash mid-write
            if entry.pop("gate_id", None) == gate_id:
                found = entry
        return None if found is None else GateAnswer.model_validate(found)

    @contextmanager
    def driving(self) -> Iterator[None]:
        """Hold the run's lock while driving it: two processes never advance the same run."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / "driver.lock").open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise EyasError(
                    f"Run {self.run_id} is being driven by another eyas process right now; watch it with "
                    f"`eyas status {self.run_id}` or stop that process first."
                ) from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def is_driven(self) -> bool:
        lock_path = self.root / "driver.lock"
        if not lock_path.exists():
            return False
        with lock_path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
            return False


def open_run(run_id: str, root: Path | None = None) -> RunDir:
    run = RunDir((root or runs_root()) / run_id)
    if not run.meta_path.exists():
        raise EyasError(f"There is no run '{run_id}' in {run.root.parent}; `eyas runs` lists the runs there.")
    return run


def list_runs(root: Path | None = None) -> list[RunDir]:
    base = root or runs_root()
    if not base.is_dir():
        return []
    return sorted((RunDir(path) for path in base.iterdir() if (path / "run.json").exists()), key=lambda r: r.run_id)
