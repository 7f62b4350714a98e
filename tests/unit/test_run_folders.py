"""Run folders: owner-only, created only once a run can start, listed without being changed; and a replay that
does not depend on where its transcript lies."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.agents.faces.cli.replay import replay
from eyas.graph.life import session
from eyas.graph.life.runner import checkpointer
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.errors import HostUnreachable
from in_process import eyas
from jobs_config import UNREACHABLE

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty runs folder (not created yet) under the usual umask, so modes come from eyas alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("EYAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EYAS_TARGET_PORT", raising=False)
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "c.toml").write_text(UNREACHABLE.format(known_hosts=tmp_path / "known_hosts"))
    old = os.umask(0o022)
    yield tmp_path / "runs"
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_run_folder_and_everything_in_it_is_owner_only(runs: Path) -> None:
    ran = eyas("run", "--config", "c.toml", "--run-id", "private")
    assert "Traceback" not in ran.output and (runs / "private" / "run.json").exists(), ran.output
    run = RunDir(runs / "private")
    run.record_answer("gate", GateAnswer(action="approve"))
    run.write_report("# report\n")
    with checkpointer(run) as saver:  # SQLite's -wal and -shm exist while a connection writes
        saver.setup()
        saver.conn.execute("CREATE TABLE probe (x)")
        saver.conn.commit()
        database_files = sorted(path.name for path in run.root.glob("checkpoints.sqlite*"))
        assert database_files == ["checkpoints.sqlite", "checkpoints.sqlite-shm", "checkpoints.sqlite-wal"]
        modes = {path.name: mode(path) for path in run.root.iterdir()}
    assert mode(runs) == 0o700 and mode(run.root) == 0o700
    assert modes.pop("answers") == 0o700  # one file per answered gate, each owner-only
    assert [mode(claim) for claim in run.answer_claims.iterdir()] == [0o600]
    for name in ("run.json", "transcript.jsonl", "answers.jsonl", "report.md", "driver.lock", "heartbeat.json",
                 *database_files):  # fmt: skip
        assert modes.pop(name) == 0o600, name
    assert modes == {}, f"files not checked for their mode: {modes}"


def test_a_run_that_cannot_open_its_host_leaves_no_run_behind(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*_: object) -> None:
        raise HostUnreachable("Cannot reach 127.0.0.1:1. Check the address and port in the config.")

    monkeypatch.setattr(session, "open_host", unreachable)
    first = eyas("run", "--config", "c.toml", "--run-id", "half")
    assert first.code == 5 and "Cannot reach 127.0.0.1:1" in first.output, first.output  # the unreachable status
    assert not (runs / "half" / "run.json").exists()
    assert "half" not in eyas("runs").output
    again = eyas("run", "--config", "c.toml", "--run-id", "half")  # the id is still free
    assert again.code == 5 and "Cannot reach" in again.output and "exists already" not in again.output


def test_listing_runs_changes_nothing_and_tells_a_run_without_checkpoint(runs: Path) -> None:
    chat = RunDir(runs / "a-chat")
    chat.write_meta({"config": None, "embedded": None, "policy": None, "sizes": None, "kind": "chat"})
    listed = eyas("runs")
    assert listed.code == 0 and "chat, no checkpoint" in listed.output and "ended" not in listed.output
    assert not chat.checkpoints.exists()
    resumed = eyas("resume", "a-chat")
    assert resumed.code == 2 and "has no checkpoint" in resumed.output and "`eyas run`" in resumed.output


def test_a_replay_takes_the_run_id_from_the_recording_not_the_folder(tmp_path: Path) -> None:
    """The same recording in folders of two names replays alike (the id names the run's jobs and paths)."""
    reports = []
    for folder in ("full-pipeline", "a-copy-named-otherwise"):
        shutil.copytree(EXAMPLE, tmp_path / folder)
        report, state = replay(tmp_path / folder / "transcript.jsonl")
        assert state.get("run_id") in (None, "full-pipeline")
        reports.append(report.model_dump(exclude={"transcript"}))
    assert reports[0] == reports[1]
