"""One damaged run folder never breaks the others (issue 28 item 1): beside a healthy run, fourteen kinds of damage,
each in a real stored run of its own, are listed by `eyas runs` and the dashboard as damaged with the file at fault
and the fix; `eyas watch --once` says each once and goes on; and a command on a damaged run answers with one
paragraph, no traceback. Nothing here is a stand-in: real `eyas` processes, the real dashboard, real SQLite."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dashboard_server import dashboard
from eyas.graph.life.heartbeat import Beat, heartbeat_path
from eyas.graph.runs import RunDir
from eyas.tools.private_files import write_private
from gated_runs import run_at_data_gate
from in_process import Ran
from in_process import eyas as in_process_eyas


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not what eyas wrote\n" * 40)


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _directory(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.mkdir()


def _dangling(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.with_name("gone"))


def _text(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text)


# name -> (the damaged file, how it is damaged, words the diagnosis must hold)
DAMAGE: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "db-garbage": ("checkpoints.sqlite", _garbage, "checkpoints.sqlite is not a readable SQLite database"),
    "db-cut": ("checkpoints.sqlite", _cut, "checkpoints.sqlite is not a readable SQLite database"),
    "db-directory": ("checkpoints.sqlite", _directory, "checkpoints.sqlite is a directory"),
    "db-dangling": ("checkpoints.sqlite", _dangling, "checkpoints.sqlite is a link to nothing"),
    "meta-empty": ("run.json", _text(""), "run.json is not a JSON object"),
    "meta-garbage": ("run.json", _text('{"kind": "pipel'), "run.json is not a JSON object"),
    "meta-list": ("run.json", _text("[1, 2]"), "run.json is not a JSON object"),
    "meta-directory": ("run.json", _directory, "run.json is a directory"),
    "meta-wrong-shape": ("run.json", _text('{"kind": 5}'), "run.json is not the run record eyas writes (kind: "),
    "lock-directory": ("driver.lock", _directory, "driver.lock is a directory"),
    "beat-garbage": ("heartbeat.json", _text("{{{"), "heartbeat.json is not a JSON object"),
    "beat-directory": ("heartbeat.json", _directory, "heartbeat.json is a directory"),
    "watch-garbage": ("watch.json", _text("[]"), "watch.json is not a JSON object"),
    "answers-file": ("answers", _text("not a folder"), "answers is a file, not the folder of gate answers"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A healthy run at its data gate and one damaged run per kind, each a real stored run with an ended driver's
    heartbeat (so that `eyas watch` looks at every one)."""
    runs = tmp_path_factory.mktemp("damage") / "runs"
    for name in ["healthy", *DAMAGE]:
        run = run_at_data_gate(runs, f"run-{name}")
        beat = Beat(pid=os.getpid(), at=time.time(), interval_s=10.0, driving=False, exit="waiting at a gate")
        write_private(heartbeat_path(run), beat.model_dump_json())
    for name, (file, spoil, _) in DAMAGE.items():
        spoil(runs / f"run-{name}" / file)
    return runs


def eyas(runs: Path, *args: str) -> Ran:
    """The real command line, in this process (tests/support/in_process.py): 65 commands, without 65 interpreter
    starts."""
    return in_process_eyas(*args, env={"EYAS_RUNS_DIR": str(runs)})


def test_a_damaged_run_is_listed_as_damaged_and_the_others_are_unaffected(runs: Path, tmp_path: Path) -> None:
    listed = eyas(runs, "runs", "--json")
    assert listed.code == 0, listed.output
    rows = {row["run"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {f"run-{name}" for name in ["healthy", *DAMAGE]}
    assert rows["run-healthy"]["state"] == "waiting at a gate" and rows["run-healthy"]["damage"] is None
    for name, (_, _, diagnosis) in DAMAGE.items():
        row = rows[f"run-{name}"]
        assert row["state"] == "damaged" and diagnosis in row["damage"], (name, row)
        assert "`" in row["damage"].split(diagnosis, 1)[1], (name, row["damage"])  # a command that recovers

    table = eyas(runs, "runs")
    assert table.code == 0 and "Traceback" not in table.output, table.output
    shown = " ".join(table.output.split())  # rich folds the paragraphs at the terminal's width
    assert all(diagnosis in shown for _, _, diagnosis in DAMAGE.values()), table.output

    with dashboard(runs, tmp_path / "ui.log") as served:
        client = served.logged_in()
        page = client.get("/")
        damaged = client.get("/runs/run-db-garbage")
        healthy = client.get("/runs/run-healthy")
    assert page.status_code == 200 and "waiting at a gate" in page.text
    assert all(diagnosis in page.text for _, _, diagnosis in DAMAGE.values())
    assert damaged.status_code == 409 and "not a readable SQLite database" in damaged.text
    assert healthy.status_code == 200 and "Gate: data" in healthy.text


def test_the_watch_says_each_damage_once_and_goes_on(runs: Path) -> None:
    watched = eyas(runs, "watch", "--once")
    out = watched.output
    assert watched.code == 0 and "Traceback" not in out, out
    for name, (_, _, diagnosis) in DAMAGE.items():
        assert out.count(f"Run run-{name} is damaged: {diagnosis}") == 1, (name, out)
    # The healthy run is said in a line of its own: what the watch found of it.
    assert out.count("run run-healthy: ended (") == 1, out


@pytest.mark.parametrize("command", ["status", "resume", "approve", "report"])
def test_a_command_on_a_damaged_run_answers_in_one_paragraph(runs: Path, command: str) -> None:
    for name, (_, _, diagnosis) in DAMAGE.items():
        done = eyas(runs, command, f"run-{name}")
        assert done.code == 2 and "Traceback" not in done.output, (name, done.output)
        assert diagnosis in " ".join(done.output.split()), (name, done.output)
    assert RunDir(runs / "run-healthy").checkpoints.exists()
