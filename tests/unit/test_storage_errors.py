"""A read-only or full runs folder (issue 28 item 5): reading runs works without write access, and a command that
must write says which file, why and what to do, in one paragraph, never a traceback.

Real filesystems: a tmpfs of a few MiB, mounted for the test, remounted read-only, then filled. Mounting needs root
with CAP_SYS_ADMIN (as on this project's machines and CI); elsewhere the test is skipped, saying why.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.tools.sqlite_write import storage_error
from gated_runs import run_at_data_gate
from in_process import eyas
from small_volume import fill, small_volume


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    with small_volume(tmp_path / "volume", 4 * 1024**2) as mount:
        yield mount


def remount(mount: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)


def test_a_read_only_runs_folder_is_read_and_a_write_is_refused_in_one_paragraph(volume: Path, tmp_path: Path) -> None:
    made = run_at_data_gate(tmp_path / "made", "run-ro")
    shutil.copytree(made.root, volume / "run-ro")
    remount(volume, "ro")
    env = {"EYAS_RUNS_DIR": str(volume)}
    listed = eyas("runs", "--json", env=env)
    assert listed.code == 0 and "run-ro" in listed.stdout and "waiting at a gate" in listed.stdout, listed.output
    status = eyas("status", "run-ro", env=env)
    assert status.code == 0 and "data" in status.output, status.output
    refused = eyas("approve", "run-ro", env=env)
    assert refused.code == 2 and "Traceback" not in refused.output, refused.output
    assert "(Read-only file system): the filesystem is read-only: remount it read-write" in refused.output
    assert str(volume / "run-ro") in refused.output


def test_a_full_runs_folder_names_the_file_and_says_to_free_space(volume: Path, tmp_path: Path) -> None:
    made = run_at_data_gate(tmp_path / "made", "run-full")
    shutil.copytree(made.root, volume / "run-full")
    filler = fill(volume)
    refused = eyas("approve", "run-full", "--reason", "x" * 200_000, env={"EYAS_RUNS_DIR": str(volume)})
    assert refused.code == 2 and "Traceback" not in refused.output, refused.output
    assert "(No space left on device): the filesystem is full: free space there" in refused.output
    filler.unlink()
    answered = eyas("approve", "run-full", env={"EYAS_RUNS_DIR": str(volume)})
    assert answered.code == 0, answered.output  # with room again, the same command works


def test_a_checkpoint_write_on_a_full_disk_is_said_as_a_full_disk(volume: Path, tmp_path: Path) -> None:
    """SQLite reports a full disk as "disk I/O error" or "database or disk is full", without the errno: the resume
    says which file could not be written and that the filesystem is full, as for any other write."""
    run = run_at_data_gate(tmp_path / "runs", "run-db")
    env = {"EYAS_RUNS_DIR": str(tmp_path / "runs")}
    assert eyas("approve", "run-db", env=env).code == 0
    # The DB (with its log) on the full volume, linked from a run folder that has room: SQLite's write is refused.
    for part in run.root.glob("checkpoints.sqlite*"):
        shutil.move(part, volume / part.name)
    run.checkpoints.symlink_to(volume / "checkpoints.sqlite")
    fill(volume)
    refused = eyas("resume", "run-db", env=env)
    assert refused.code == 2 and "Traceback" not in refused.output, refused.output
    said = f"eyas could not write {volume / 'checkpoints.sqlite'} (No space left on device): the filesystem is full"
    assert said in refused.output, refused.output


def test_a_read_only_database_is_said_as_a_read_only_filesystem(volume: Path) -> None:
    """SQLite opens a file on a read-only filesystem read-only and refuses the write as "attempt to write a
    readonly database": the filesystem says why."""
    made = sqlite3.connect(volume / "c.sqlite")
    made.execute("CREATE TABLE t (x)")
    made.commit()
    made.close()
    remount(volume, "ro")
    connection = sqlite3.connect(volume / "c.sqlite")
    with pytest.raises(sqlite3.OperationalError, match="readonly database") as refused:
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()
    error = storage_error(refused.value, volume / "c.sqlite")
    assert error is not None and error.errno == errno.EROFS and error.filename == str(volume / "c.sqlite")
