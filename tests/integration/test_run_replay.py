"""Whole runs recorded for real on the embedded target, replayed offline through the same graph code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eyas.agents.faces.cli.replay import replay
from eyas.graph.life.runner import read_run
from eyas.graph.runs import RunDir
from eyas.tools.jobs.upload import LISTING, changed_scripts
from eyas.tools.target.embedded import EmbeddedTarget
from offline import world_watch
from pipeline_runs import TINY, eyas, job_dir, only_run

EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"


@pytest.fixture(scope="module")
def recorded_run(embedded_target: EmbeddedTarget, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run that stops at the data gate, is answered from the command line, and ends rejected."""
    runs = tmp_path_factory.mktemp("runs")
    stopped = eyas(embedded_target, runs, "run", *TINY)
    assert stopped.returncode == 3 and "stopped at the data gate" in stopped.stdout, stopped.stdout + stopped.stderr
    run = only_run(runs)
    rejected = eyas(embedded_target, runs, "approve", run.name, "--reject", "--reason", "recorded for replay")
    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    ended = eyas(embedded_target, runs, "resume", run.name)
    assert ended.returncode == 0, ended.stdout + ended.stderr
    return run


@pytest.mark.slow
def test_a_reject_at_a_gate_ends_the_run_with_its_reason_and_launches_nothing(
    embedded_target: EmbeddedTarget, recorded_run: Path
) -> None:
    report = (recorded_run / "report.md").read_text()
    assert "rejected at the data gate: recorded for replay" in report
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


def stale_workloads(transcript: Path) -> list[str]:
    """The workload scripts the recorded run did not find on its host as they are now (its upload's listing):
    a replay of such a recording diverges at the upload, and only `make examples` can fix it."""
    for line in transcript.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "command" and LISTING in event.get("command", ""):
            return [path.name for path in changed_scripts(event["stdout"])]
    return []


@pytest.mark.parametrize("example", sorted(p.parent.name for p in EXAMPLES.glob("*/transcript.jsonl")))
def test_example_runs_replay_without_divergence(example: str, tmp_path: Path) -> None:
    stale = stale_workloads(EXAMPLES / example / "transcript.jsonl")
    assert not stale, f"runs/examples/{example} was recorded with other versions of {', '.join(stale)}: `make examples`"
    shutil.copytree(EXAMPLES / example, tmp_path / example)
    with world_watch() as attempts:
        report, state = replay(tmp_path / example / "transcript.jsonl")
    assert attempts == []
    assert report.ok, report.divergence.diff if report.divergence else report.unconsumed
    assert state.get("report") or state.get("messages")  # a run's report, or a chat's conversation
