"""Shell completion as a shell asks for it: the real `eyas` entry point run with typer's completion variables (what
the script `eyas --install-completion` installs sets), over a runs folder made here. A run id completes from its
typed start, newest first, wherever a command takes a run; a size with a few words completes to them; an unreadable
runs folder completes to nothing rather than printing an error into the operator's command line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pipeline_runs import EYAS

OLDER, NEWER = "run-20261201-010101-aaaa", "run-20261202-020202-bbbb"


def completions(runs: Path, line: str) -> list[str]:
    """What bash's completion gets for `line` (the word under the cursor last; empty for a new word)."""
    words = line.split(" ")
    env = {**os.environ, "EYAS_RUNS_DIR": str(runs), "_EYAS_COMPLETE": "complete_bash",
           "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}  # fmt: skip
    done = subprocess.run([EYAS], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    return done.stdout.split()


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    for run_id in (OLDER, NEWER):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "run.json").write_text("{}")
    (tmp_path / "notes").mkdir()  # not a run
    return tmp_path


def test_run_ids_complete_newest_first_for_every_command_that_takes_a_run(runs: Path) -> None:
    for command in ("status", "resume", "approve", "deploy", "rollback", "report", "show", "watch", "publish"):
        assert completions(runs, f"eyas {command} run-2026120") == [NEWER, OLDER], command
    assert completions(runs, "eyas status run-20261201") == [OLDER]
    assert completions(runs, "eyas status x") == []


def test_sizes_with_a_few_words_complete_to_them(runs: Path) -> None:
    assert completions(runs, "eyas plan --extraction-mode h") == ["hybrid"]
    assert completions(runs, "eyas run --extraction-mode ") == ["auto", "offline", "online", "hybrid"]
    assert completions(runs, "eyas run --prompts s") == ["sharegpt", "shipped"]
    assert completions(runs, "eyas run --extraction-backend v") == ["vllm"]


def test_an_unreadable_runs_folder_completes_to_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    assert completions(tmp_path / "file" / "runs", "eyas status run-") == []
