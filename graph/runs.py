"""Run folders: runs/<run_id>/ holds the checkpoint DB, the transcript, answers to gates and the report."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eyas.graph.run_damage import damage
from eyas.graph.state import GateAnswer
from eyas.tools.errors import EyasError, NotFound
from eyas.tools.private_files import open_private, private_dir, write_private

TRANSCRIPT = "transcript.jsonl"
RUN_ID_RULE = "1 to 64 characters: ASCII letters, digits, '.', '_' and '-', the first a letter or digit"
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AlreadyAnswered(EyasError):
    """The gate has its answer already: another operator, the dashboard or the driver's terminal was first."""

    def __init__(self, run_id: str, entry: dict[str, Any]) -> None:
        self.entry = entry
        who, at = entry.get("who", "someone"), entry.get("at", "an unknown time")
        reason = f" ({entry['reason']})" if entry.get("reason") else ""
        super().__init__(
            f"That gate of run {run_id} was already answered by {who} at {at}: {entry.get('action', '?')}{reason}. "
            f"Only the first answer counts; `eyas status {run_id}` shows where the run is now."
        )


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


RUNS_DIR_FIX = "Point EYAS_RUNS_DIR at a folder eyas may create and write, or unset it to use ./runs."


def runs_root() -> Path:
    """EYAS_RUNS_DIR, else ./runs (the repository's runs/ when run from a checkout); a path no folder can be at is
    refused here, before any command reads or writes under it."""
    root = Path(os.environ.get("EYAS_RUNS_DIR", "runs")).resolve()
    problem = _unusable(root)
    if problem is not None:
        raise EyasError(f"The runs folder {_shown(root)} {problem}. {RUNS_DIR_FIX}")
    return root


def _unusable(root: Path) -> str | None:
    """Why no folder can be at `root`: a file is there or above it, or a name is longer than its filesystem
    allows; None when nothing rules it out (creating it may still fail: see `RunDir.create`)."""
    existing = Path(root.anchor)
    for folder in [*reversed(root.parents[:-1]), root]:
        longest = os.pathconf(existing, "PC_NAME_MAX")
        if len(os.fsencode(folder.name)) > longest:
            return f"has a name longer than the {longest} bytes its filesystem allows"
        if not folder.exists():
            break
        existing = folder
        if not existing.is_dir():
            break
    if not existing.is_dir():
        return "is a file, not a folder" if existing == root else f"lies under {existing}, which is a file"
    return None


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:117] + "..."


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def check_run_id(run_id: str) -> str:
    """The one gate every run id passes (flags, arguments, recordings): an id is one folder name inside the
    runs folder, never a path out of it, a nested folder or something a shell or `eyas approve` trips on."""
    if not is_run_id(run_id):
        shown = run_id if len(run_id) <= 80 else run_id[:77] + "..."
        raise EyasError(
            f"{shown!r} is not a valid run id: a run id is {RUN_ID_RULE}, like run-20250101-120000-ab12. "
            "Use an id of that form; `eyas runs` lists the existing runs."
        )
    return run_id


def is_run_id(text: str) -> bool:
    return _RUN_ID.fullmatch(text) is not None


def run_dir(run_id: str, root: Path | None = None) -> RunDir:
    """The folder of run `run_id` (checked) in `root` (default: the runs folder); nothing is created."""
    return RunDir((root or runs_root()) / check_run_id(run_id))


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
        return self.root / TRANSCRIPT

    @property
    def progress_files(self) -> tuple[Path, ...]:
        """The files a run's progress is written to: its transcript, its checkpoint DB and that DB's write-ahead log."""
        return self.transcript, self.checkpoints, self.checkpoints.with_name(self.checkpoints.name + "-wal")

    @property
    def meta_path(self) -> Path:
        return self.root / "run.json"

    @property
    def answers(self) -> Path:
        return self.root / "answers.jsonl"

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    def create(self) -> RunDir:
        """The run's folder, and the runs folder around it, owner-only when created here."""
        try:
            private_dir(self.root.parent)
            private_dir(self.root)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG):
                raise  # a full, read-only or foreign folder: the command line's storage message names it
            raise EyasError(
                f"eyas could not create the run folder {_shown(self.root)} ({exc.strerror}). {RUNS_DIR_FIX}"
            ) from None
        return self

    def meta(self) -> dict[str, Any]:
        return json.loads(self.meta_path.read_text())

    def last_change(self) -> float | None:
        """When the run last wrote its transcript, checkpoint or run.json (epoch seconds): how long it has been
        quiet, for a list of runs; None for a folder with none of them."""
        times = []
        for path in (*self.progress_files, self.meta_path):
            try:
                times.append(path.stat().st_mtime)
            except OSError:
                continue
        return max(times, default=None)

    def write_meta(self, meta: dict[str, Any]) -> None:
        self.create()
        write_private(self.meta_path, json.dumps(meta, indent=2))

    def write_report(self, text: str) -> None:
        self.create()
        write_private(self.report, text)

    @property
    def evaluation(self) -> Path:
        return self.root / "evaluation.json"

    def write_evaluation(self, evaluation: dict[str, Any]) -> None:
        """The drafter's measurements with what they were measured on and which eyas made the run."""
        write_private(self.evaluation, json.dumps({**evaluation, "eyas": self.meta().get("eyas")}, indent=2) + "\n")

    @property
    def answer_claims(self) -> Path:
        return self.root / "answers"

    def record_answer(self, gate_id: str, answer: GateAnswer) -> None:
        """Give the gate its one answer, atomically across processes (two chats, the dashboard, `eyas approve`
        and the driver's own terminal may answer at once): the first wins, a later one is AlreadyAnswered.
        The answer is written whole to a private file first, then linked to the gate's name: a link that exists
        already fails, and nobody ever reads a half-written answer. answers.jsonl keeps the log of winners."""
        claims = private_dir(self.answer_claims)
        entry = {"gate_id": gate_id, "at": _now(), **answer.model_dump(exclude_none=True)}
        draft = claims / f".{secrets.token_hex(8)}.tmp"
        with open_private(draft, "x") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(draft, self._claim(gate_id))
        except FileExistsError:
            raise AlreadyAnswered(self.run_id, self._claimed(gate_id) or {}) from None
        finally:
            draft.unlink()
        with open_private(self.answers, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def settle_answer(self, gate_id: str, answer: GateAnswer) -> GateAnswer:
        """Record `answer`, or when someone answered first, the answer that won (which the gate then takes)."""
        try:
            self.record_answer(gate_id, answer)
            return answer
        except AlreadyAnswered:
            return self.answer_for(gate_id) or answer

    def answer_for(self, gate_id: str) -> GateAnswer | None:
        """The gate's answer, checked: another process wrote it. A run from before answers were claimed keeps
        them only in answers.jsonl, where the last one for the gate counts."""
        found = self._claimed(gate_id)
        if found is None and self.answers.exists():
            for line in self.answers.read_text().splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash mid-write
                if entry.get("gate_id") == gate_id:
                    found = entry
        if found is None:
            return None
        return GateAnswer.model_validate({k: v for k, v in found.items() if k not in ("gate_id", "at")})

    def _claim(self, gate_id: str) -> Path:
        # The interrupt id is hex today; hashed, any id is one safe file name.
        return self.answer_claims / hashlib.sha256(gate_id.encode()).hexdigest()[:32]

    def _claimed(self, gate_id: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(self._claim(gate_id).read_text())
        except FileNotFoundError:
            return None
        return entry if isinstance(entry, dict) else None

    @contextmanager
    def driving(self) -> Iterator[None]:
        """Hold the run's lock while driving it: two processes never advance the same run."""
        self.create()
        with open_private(self.root / "driver.lock", "a+") as lock:
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
        with lock_path.open("r") as lock:  # flock needs no write access: a read-only runs folder is still read
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock, fcntl.LOCK_UN)
            return False


def open_run(run_id: str, root: Path | None = None) -> RunDir:
    """The run's folder, once it is there and readable: a damaged one is refused with the file at fault and the fix."""
    run = run_dir(run_id, root)
    if not run.meta_path.exists():
        raise NotFound(f"There is no run '{run_id}' in {run.root.parent}; `eyas runs` lists the runs there.")
    found = damage(run)
    if found is not None:
        raise EyasError(found.text())
    return run


def transcript_path(given: str) -> Path:
    """The transcript a command was pointed at: a transcript file (or anything at that path, for the reader to
    judge), a run's folder holding one, else a run id in the runs folder (`open_run`). A name ending in .jsonl is
    always a path."""
    path = Path(given)
    if (path / TRANSCRIPT).is_file():
        return path / TRANSCRIPT
    if path.exists() or path.suffix == ".jsonl" or not is_run_id(given):
        return path
    return open_run(given).transcript


def list_runs(root: Path | None = None) -> list[RunDir]:
    base = root or runs_root()
    if not base.is_dir():
        return []
    found = (RunDir(path) for path in base.iterdir() if is_run_id(path.name) and (path / "run.json").exists())
    return sorted(found, key=lambda r: r.run_id)
