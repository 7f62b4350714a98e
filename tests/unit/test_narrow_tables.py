"""`eyas runs` and `eyas status` in a terminal 80 columns wide (issue 41): ids made alike share their start, so a
table keeps each id's end whole on its row's first line (a long one cut in its middle), one run takes a few lines,
and no line is wider than the terminal. The real `eyas` program in a real pseudo-terminal of that size; real run
folders at the data gate (the real graph and checkpoint DB) and real detached jobs that print progress lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gated_runs import run_at_data_gate, run_with_jobs
from terminal import Terminal

PREFIX = "nightly-llama-70b-eagle3-run-20261207-1530"
LONG = [f"{PREFIX}12-4f1c", f"{PREFIX}48-9d0e"]  # alike but for their ends
DEFAULT = "run-20261207-153107-ab12"  # eyas's own id, as new_run_id makes it
SHARDS = [f"{LONG[0]}.generate-{shard}" for shard in (0, 1)]
COLUMNS = 80


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("narrow")
    run_with_jobs(root, LONG[0], SHARDS)
    for run_id in (LONG[1], DEFAULT):
        run_at_data_gate(root / "runs", run_id)
    return {**os.environ, "EYAS_RUNS_DIR": str(root / "runs"), "EYAS_CACHE_DIR": str(root / "cache"), "TERM": "xterm"}


def screen(place: dict[str, str], *args: str) -> list[str]:
    """What `eyas ARGS` shows in the terminal, line by line, without its colours."""
    env = {key: value for key, value in place.items() if key not in ("COLUMNS", "LINES")}
    terminal = Terminal([sys.executable, "-m", "eyas", *args], env, str(Path(place["EYAS_RUNS_DIR"])), COLUMNS)
    try:
        code = terminal.read_to_end(120)
    finally:
        terminal.close()
    assert code == 0, terminal.output
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.output).splitlines()
    assert all(len(line) <= COLUMNS for line in lines), "\n".join(lines)
    return lines


def rows_of(lines: list[str], distinct: str) -> list[int]:
    return [number for number, line in enumerate(lines) if distinct in line]


def test_runs_keeps_each_ids_end_whole_at_80_columns(place: dict[str, str]) -> None:
    lines = screen(place, "runs")
    for run_id in [*LONG, DEFAULT]:
        end = run_id[-len("153012-4f1c") :]
        assert len(rows_of(lines, end)) == 1, (end, "\n".join(lines))
    assert any(DEFAULT in line for line in lines), "\n".join(lines)  # a short id is whole
    body = [line for line in lines if line.startswith("│")]
    assert len(body) <= 3 * 3, "\n".join(lines)  # three runs, each in at most three lines


def test_status_keeps_each_jobs_end_whole_at_80_columns(place: dict[str, str]) -> None:
    lines = screen(place, "status", LONG[0])
    for job_id in SHARDS:
        end = job_id[-len(".generate-0") :]  # the run's whole id is on the status line above
        assert len(rows_of(lines, end)) == 1, (end, "\n".join(lines))
    said = " ".join(" ".join(lines).split())
    assert "waiting at the approval gate of data" in said and "3/10" in said, said


# A gate decision whose reason is longer than 80 columns and full of figures with their units.
REASON = "; ".join(f"step {step} took {step}.5 s" for step in range(1, 25))


def test_a_pipe_gets_each_line_whole(tmp_path: Path) -> None:
    """Off a terminal (a log, CI) rich's default width is 80 columns: no line is cut there, so no figure is parted
    from its unit ("25.2" and "s)" on two lines), and no line carries its caller's source location."""
    decision = {"gate": "plan", "action": "approve", "reason": REASON, "who": "operator"}
    run_at_data_gate(tmp_path / "runs", "piped", {"decisions": [decision]})
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env.update(EYAS_RUNS_DIR=str(tmp_path / "runs"), EYAS_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "eyas", "status", "piped"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"gate plan: approve by operator: {REASON}\n" in done.stdout, done.stdout
    logged = "from eyas.agents.faces.cli.console import console; console.log('restarting the server')"
    done = subprocess.run([sys.executable, "-c", logged], env=env, capture_output=True, text=True, timeout=120,
                          check=True)  # fmt: skip
    assert "restarting the server" in done.stdout and ".py:" not in done.stdout and "<string>" not in done.stdout
