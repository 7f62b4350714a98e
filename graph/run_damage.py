"""A run folder eyas cannot read is listed as damaged, with what is wrong and how to recover, and never stops the
listing, the dashboard or the watch of the other runs.

A disk that filled, a copy cut short or a hand that edited the wrong file leaves one run unreadable; the operator
still needs every other run, and for the damaged one the file at fault and the way out, in words. The files are
checked as eyas reads them, before anything opens them: the run record, the checkpoint database, and the small
files that drivers and the watch keep (each rewritten by the next one, so removing it is safe when no eyas drives
the run). What the checks did not foresee is named from the error itself (`_from_error`).
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import ValidationError

from eyas.graph.run_record import RunRecord
from eyas.tools.sqlite_read import connect_read_only


class RunFiles(Protocol):
    """The files of a run folder that the checks read (graph/runs.py's RunDir, which opens a run through damage())."""

    @property
    def root(self) -> Path: ...
    @property
    def run_id(self) -> str: ...
    @property
    def meta_path(self) -> Path: ...
    @property
    def checkpoints(self) -> Path: ...
    @property
    def transcript(self) -> Path: ...
    @property
    def answer_claims(self) -> Path: ...


# The files a driver or the watch writes again when they are gone: what each holds.
REWRITTEN = {
    "driver.lock": "the lock a driving eyas holds",
    "heartbeat.json": "the driver's heartbeat",
    "watch.json": "eyas watch's count of restarts and notices",
}
T = TypeVar("T")
Run = TypeVar("Run", bound=RunFiles)
# Errors from reading a run folder: a missing, unreadable or mistyped file, a database that is not one, bad JSON.
_READ_ERRORS = (OSError, ValueError, TypeError, KeyError, sqlite3.Error)


@dataclass(frozen=True)
class Damage:
    """What is wrong with one file of a run, and what the operator can do about it."""

    run_id: str
    path: Path
    problem: str
    fix: str

    def text(self) -> str:
        return f"Run {self.run_id} is damaged: {self.path.name} {self.problem}. {self.fix}"


def damage(run: RunFiles) -> Damage | None:
    """The first damaged file of the run, or None when everything eyas reads is readable."""
    for name, holds in REWRITTEN.items():
        path, fix = run.root / name, f"It is {holds}, written again when missing: {_remove(run, name)}"
        found = _not_a_file(run, path, fix)
        if found is None and name.endswith(".json") and path.exists() and not _json_object(path):
            found = Damage(run.run_id, path, "is not a JSON object", fix)
        if found is not None:
            return found
    return _run_record(run) or _checkpoints(run) or _answer_claims(run)


def read_undamaged(run: Run, read: Callable[[Run], T]) -> T | Damage:
    """`read(run)`, or what keeps it from reading the run: a damage the checks find first, or one named by the
    error reading raised. Where a damaged run must not stop the work on the others (the listings, the watch)."""
    found = damage(run)
    if found is not None:
        return found
    try:
        return read(run)
    except _READ_ERRORS as error:
        return _from_error(run, error)


def _from_error(run: RunFiles, error: BaseException) -> Damage:
    """A damage the checks did not foresee, named by the error that reading the run raised."""
    where = Path(getattr(error, "filename", None) or run.root)
    detail = " ".join(str(error).split()) or type(error).__name__
    return Damage(run.run_id, where, f"could not be read ({type(error).__name__}: {detail[:200]})", _set_aside(run))


def _run_record(run: RunFiles) -> Damage | None:
    fix = (
        "It records how the run was started (config, policy, sizes): restore it from a backup of the folder. "
        + _set_aside(run)
    )
    found = _not_a_file(run, run.meta_path, fix)
    if found is None and not _json_object(run.meta_path):
        found = Damage(run.run_id, run.meta_path, "is not a JSON object (empty, cut short or edited)", fix)
    if found is None:
        try:
            RunRecord.model_validate_json(run.meta_path.read_bytes())
        except ValidationError as error:
            from eyas.tools.settings.config import format_validation_error  # the config's models: for this case only

            problems = "; ".join(format_validation_error(error))
            found = Damage(run.run_id, run.meta_path, f"is not the run record eyas writes ({problems[:200]})", fix)
    return found


def _checkpoints(run: RunFiles) -> Damage | None:
    """The checkpoint database, opened read-only so that a check never creates or repairs anything."""
    path, transcript = run.checkpoints, shlex.quote(str(run.transcript))
    fix = (
        "The run cannot resume from its checkpoints; its transcript still shows and replays what it did "
        f"(`eyas show {transcript}`, `eyas replay {transcript}`). " + _set_aside(run)
    )
    found = _not_a_file(run, path, fix) if path.exists() or path.is_symlink() else None
    if found is not None or not path.exists():
        return found
    try:
        with closing(connect_read_only(path)) as database:
            verdict = database.execute("PRAGMA quick_check").fetchone()
    except sqlite3.Error as error:
        return Damage(run.run_id, path, f"is not a readable SQLite database ({error})", fix)
    if verdict is None or verdict[0] != "ok":
        return Damage(
            run.run_id, path, f"fails SQLite's integrity check ({verdict[0] if verdict else 'no answer'})", fix
        )
    return None


def _answer_claims(run: RunFiles) -> Damage | None:
    path = run.answer_claims
    if not path.exists() or path.is_dir():
        return None
    here, moved = shlex.quote(str(path)), shlex.quote(f"{path}.broken")
    fix = f"The answers are logged in answers.jsonl too: move it aside (`mv {here} {moved}`); an answer since lost is "
    return Damage(run.run_id, path, "is a file, not the folder of gate answers eyas keeps",
                  fix + "given again with `eyas approve`.")  # fmt: skip


def _not_a_file(run: RunFiles, path: Path, fix: str) -> Damage | None:
    if path.is_symlink() and not path.exists():
        return Damage(run.run_id, path, "is a link to nothing", fix)
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        return Damage(run.run_id, path, f"is {kind}, not the file eyas writes", fix)
    return None


def _json_object(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text()), dict)
    except _READ_ERRORS:
        return False


def _remove(run: RunFiles, name: str) -> str:
    return f"when no eyas drives the run, remove it (`rm -r {shlex.quote(str(run.root / name))}`)."


def _set_aside(run: RunFiles) -> str:
    aside, folder = shlex.quote(str(run.root.parent.parent / "damaged-runs")), shlex.quote(str(run.root))
    return (
        f"To take it out of the listings, move it out of the runs folder: `mkdir -p {aside} && mv {folder} {aside}/`."
    )
