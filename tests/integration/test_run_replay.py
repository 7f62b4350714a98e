"""Whole runs recorded for real on the embedded target, replayed offline through the same graph code."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
from pathlib import Path

import pytest

from eyas.agents.faces.cli.replay import replay
from eyas.graph.life.run_view import read_run
from eyas.graph.runs import RunDir
from eyas.tools.target.embedded import EmbeddedTarget
from offline import world_watch
from pipeline_runs import EYAS, TINY, environment, events, eyas, job_dir, only_run
from recorded_examples import EXAMPLES, recorded_examples, stale_workloads
from small_volume import fill, small_volume
from waiting import wait_for


@pytest.fixture(scope="module")
def stopped_run(embedded_target: EmbeddedTarget, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run that stopped at the data gate, kept as it stopped: each test answers its own copy."""
    runs = tmp_path_factory.mktemp("stopped")
    stopped = eyas(embedded_target, runs, "run", *TINY)
    assert stopped.returncode == 3 and "stopped at the data gate" in stopped.stdout, stopped.stdout + stopped.stderr
    return only_run(runs)


def copy_of(run: Path, runs: Path) -> Path:
    shutil.copytree(run, runs / run.name)
    return runs / run.name


@pytest.fixture(scope="module")
def recorded_run(embedded_target: EmbeddedTarget, stopped_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stopped run, answered from the command line and ended rejected."""
    run = copy_of(stopped_run, tmp_path_factory.mktemp("runs"))
    rejected = eyas(embedded_target, run.parent, "approve", run.name, "--reject", "--reason", "recorded for replay")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    ended = eyas(embedded_target, run.parent, "resume", run.name)
    # Rejected at a gate: the run stopped before its end, exit 1 (the README's exit table).
    assert ended.returncode == 1, ended.stdout + ended.stderr
    return run


@pytest.mark.slow
def test_a_reject_at_a_gate_ends_the_run_with_its_reason_and_launches_nothing(
    embedded_target: EmbeddedTarget, recorded_run: Path
) -> None:
    report = (recorded_run / "report.md").read_text()
    assert "**Outcome:** stopped at the data gate: rejected: recorded for replay" in report
    assert "| data | reject | cli | recorded for replay |" in report
    assert not job_dir(embedded_target, recorded_run.name, "generate").exists()


@pytest.mark.slow
def test_a_recorded_run_replays_offline_to_the_same_state(recorded_run: Path) -> None:
    recorded_state = read_run(RunDir(recorded_run)).state
    with world_watch() as attempts:
        report, state = replay(recorded_run / "transcript.jsonl")
    assert attempts == []
    assert report.divergence is None and not report.unconsumed, report
    assert report.events_replayed == report.events_total
    assert state == recorded_state
    assert state["stopped"] == "rejected at the data gate: recorded for replay"


@pytest.mark.slow
def test_a_tampered_answer_diverges_at_that_event(recorded_run: Path, tmp_path: Path) -> None:
    """The disk check's df answers 1 byte free: the plan's verdict changes, and replay says where."""
    lines = (recorded_run / "transcript.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    index = next(i for i, e in enumerate(events) if e["kind"] == "command" and "df -P -B1" in e["command"])
    fields = events[index]["stdout"].splitlines()[-1].split()
    fields[3] = "1"  # available bytes
    events[index]["stdout"] = "\n".join([*events[index]["stdout"].splitlines()[:-1], " ".join(fields)]) + "\n"
    tampered = tmp_path / "transcript.jsonl"
    tampered.write_text("".join(json.dumps(event) + "\n" for event in events))
    report, _ = replay(tampered)
    assert report.divergence is not None
    assert report.divergence.seq is not None and report.divergence.seq > events[index]["seq"]
    assert report.divergence.kind == "node"  # the first thing the changed answer alters: the node's output
    # The verify node's disk check reads the tampered df: its free bytes are what the diff shows changed.
    assert "free_disk_bytes" in report.divergence.diff, report.divergence.diff


def test_cut_transcript_replays_up_to_the_cut(tmp_path: Path) -> None:
    source = sorted(EXAMPLES.glob("*/transcript.jsonl"))
    if not source:
        pytest.fail("runs/examples holds no recorded run; `make examples` records them")
    text = source[0].read_text()
    cut = tmp_path / "transcript.jsonl"
    cut.write_text(text[: len(text) // 2])  # mid-line, as a crash leaves it
    report, _ = replay(cut)
    assert any("torn" in warning or "cut" in warning for warning in report.warnings), report.warnings
    assert report.events_replayed > 0


@pytest.mark.parametrize("example", recorded_examples())
def test_example_runs_replay_without_divergence(example: str, tmp_path: Path) -> None:
    assert not stale_workloads(EXAMPLES / example / "transcript.jsonl"), "see test_examples_current: `make examples`"
    shutil.copytree(EXAMPLES / example, tmp_path / example)
    with world_watch() as attempts:
        report, state = replay(tmp_path / example / "transcript.jsonl")
    assert attempts == []
    assert report.ok, report.divergence.diff if report.divergence else report.unconsumed
    assert state.get("report") or state.get("messages")  # a run's report, or a chat's conversation


def resumed_at_a_terminal(target: EmbeddedTarget, run: Path) -> subprocess.Popen[str]:
    """`eyas resume RUN` with its stdin a terminal (a pseudo-terminal nobody types on): it waits at the gate for an
    answer typed there or given with `eyas approve`."""
    _, follower = pty.openpty()
    resumed = subprocess.Popen(
        [EYAS, "resume", run.name], env=environment(target, run.parent), stdin=follower, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    os.close(follower)
    return resumed


@pytest.mark.slow
def test_a_run_resumed_after_its_disk_filled_replays_without_divergence(
    embedded_target: EmbeddedTarget, stopped_run: Path, tmp_path: Path
) -> None:
    """Issue 28: the disk fills while a resumed run waits at a gate; the answer comes, the gate and the report run,
    and their checkpoint cannot be written, so the stored run stays a step behind what its transcript recorded.
    Once space is freed the next resume continues from that earlier checkpoint, and replay (whose checkpoints, in
    memory, never failed) continues from the same one instead of diverging."""
    run = copy_of(stopped_run, tmp_path / "runs")
    with small_volume(tmp_path / "volume", 4 * 1024**2) as volume:
        for part in run.glob("checkpoints.sqlite*"):  # the DB on a volume that fills; the transcript has room
            shutil.move(part, volume / part.name)
        (run / "checkpoints.sqlite").symlink_to(volume / "checkpoints.sqlite")
        waiting = resumed_at_a_terminal(embedded_target, run)
        wait_for(lambda: gate_shown_again(run), timeout=120, what="the resumed run to wait at the data gate")
        filler = fill(volume)
        answered = eyas(embedded_target, run.parent, "approve", run.name, "--reject", "--reason", "the disk filled")
        assert answered.returncode == 0, answered.stdout + answered.stderr
        out, _ = waiting.communicate(timeout=120)
        assert waiting.returncode == 2 and "the filesystem is full" in out, out
        assert "Traceback" not in out, out
        filler.unlink()
        ended = eyas(embedded_target, run.parent, "resume", run.name)
        # Rejected at a gate: the run stopped before its end, exit 1 (the README's exit table).
        assert ended.returncode == 1, ended.stdout + ended.stderr
        recorded_state = read_run(RunDir(run)).state
    assert recorded_state["stopped"] == "rejected at the data gate: the disk filled"
    report, state = replay(run / "transcript.jsonl")
    assert report.ok and report.events_replayed == report.events_total, report
    assert state == recorded_state


def gate_shown_again(run: Path) -> bool:
    """The resumed try has run the gate node again (after its resume event) and now waits for the answer."""
    kinds = [(event["kind"], event.get("phase")) for event in events(run)]
    resumed = len(kinds) - kinds[::-1].index(("resume", None)) if ("resume", None) in kinds else None
    return resumed is not None and ("node", "end") in kinds[resumed:]
