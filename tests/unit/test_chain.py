"""The transcript's hash chain: an altered or a removed event is named where it is, even when replay would never
notice it; transcripts recorded before the chain read as unchained, not as broken."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript

EXAMPLE = Path(__file__).parents[2] / "runs/examples/full-pipeline/transcript.jsonl"


def record(path: Path) -> None:
    """Five events: two commands, a gate answered with a reason nothing downstream reads, two more commands."""
    recorder = Recorder.open(path)
    host = recorder.host(LocalHost())
    host.run("echo one", timeout=10)
    host.run("echo two", timeout=10)
    recorder.cross("approval", {"gate": "train"}, lambda: {"decision": "approve", "reason": "fits", "who": "alice"})
    host.run("echo three", timeout=10)
    host.run("echo four", timeout=10)
    recorder.close()


def rewrite(path: Path, change: Any) -> None:
    """Edit the file as a person would: parse every line, change some, write it back re-spaced."""
    events = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(event, indent=None) + "\n" for event in change(events)))


def replay_report(path: Path) -> Any:
    """Replay the five events with the same code that recorded them."""
    session = ReplaySession.load(path)
    host = session.host("local")
    for command in ("echo one", "echo two"):
        host.run(command, timeout=10)
    session.cross("approval", {"gate": "train"}, lambda: {})
    for command in ("echo three", "echo four"):
        host.run(command, timeout=10)
    return session.report()


def eyas_show_verify(path: Path) -> subprocess.CompletedProcess[str]:
    """The real command line, in its own process (one test pays its start-up; the others check the chain's API)."""
    return subprocess.run(
        [sys.executable, "-m", "eyas", "show", "--verify", str(path)],
        capture_output=True, text=True, timeout=120, env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_an_intact_chain_verifies_and_a_respaced_file_still_does(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record(path)
    rewrite(path, lambda events: events)  # same values, other spelling (spaces after ':' and ',')
    loaded = read_transcript(path)
    assert loaded.chain.status == "chained" and loaded.chain.intact and loaded.chain.events == 5
    assert replay_report(path).ok


def test_an_altered_answer_that_changes_nothing_downstream_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record(path)

    def alter(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        events[2]["who"] = "mallory"
        return events

    rewrite(path, alter)
    report = replay_report(path)
    # Replay alone asks the same requests: the who of an answer is part of the response nothing reads again.
    assert report.divergence is None and not report.unconsumed
    assert not report.ok
    assert report.chain.first_break is not None
    assert (report.chain.first_break.what, report.chain.first_break.seq) == ("altered", 2)

    shown = eyas_show_verify(path)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "event #2 (line 3) was altered" in " ".join(shown.stdout.split())


def test_a_removed_event_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record(path)
    rewrite(path, lambda events: [event for event in events if event["seq"] != 3])

    check = read_transcript(path).chain
    assert check.first_break is not None
    assert (check.first_break.what, check.first_break.seq) == ("removed", 4)
    assert "event #3 removed before event #4" in check.first_break.message


def test_removing_the_first_event_is_named_too(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record(path)
    rewrite(path, lambda events: events[1:])
    check = read_transcript(path).chain
    assert check.first_break is not None and (check.first_break.what, check.first_break.seq) == ("removed", 1)


def test_a_resumed_transcript_continues_the_chain_past_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])  # the crash cut the last event
    recorder = Recorder.open(path)
    recorder.host(LocalHost()).run("echo five", timeout=10)
    recorder.close()
    loaded = read_transcript(path)
    assert loaded.torn_lines == [5] and loaded.chain.status == "chained" and loaded.chain.intact


def test_an_old_transcript_reads_as_unchained_and_still_replays(tmp_path: Path) -> None:
    example = read_transcript(EXAMPLE).chain  # `make examples` records with the chain
    assert (example.status, example.intact) == ("chained", True)

    path = tmp_path / "t.jsonl"
    record(path)
    rewrite(path, lambda events: [{k: v for k, v in event.items() if k != "prev"} for event in events])
    old = read_transcript(path).chain  # as an eyas from before the chain wrote it
    assert old.status == "unchained" and old.intact and replay_report(path).ok
    assert "unchained: recorded by an eyas without the hash chain" in old.describe(str(path))

    # Resumed by an eyas with the chain: the new events link on, the old ones are said to be unchained.
    recorder = Recorder.open(path)
    recorder.host(LocalHost()).run("echo five", timeout=10)
    recorder.close()
    check = read_transcript(path).chain
    assert (check.status, check.unchained_before, check.intact) == ("partly chained", 5, True)
