"""A run killed with kill -9 in the middle of a node and resumed replays without divergence: the resume event marks
where the crash cut the first try short, and replay stops that try there (CrashBoundary) instead of diverging.

Real processes, a real SIGKILL and the real transcript writer (which continues the file and its hash chain after
a torn line); the node is tests/support/crash_node.py, a poll loop on this machine, so no vLLM is needed. The pipeline's
own kill -9 test (test_pipeline.py) replays a crash-resumed `eyas run` the same way."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from crash_node import RESUMED_FROM, START, run_node
from eyas.tools.recording.replay import CrashBoundary, Divergence, ReplaySession
from eyas.tools.recording.transcript import ResumeEvent
from eyas.tools.recording.transcript_reader import read_transcript
from waiting import wait_for

NODE = Path(__file__).resolve().parents[1] / "support" / "crash_node.py"


def pauses(transcript: Path) -> int:
    return transcript.read_text().count('"op":"sleep"') if transcript.exists() else 0


@pytest.fixture
def crashed_and_resumed(tmp_path: Path) -> tuple[Path, str]:
    transcript, flag = tmp_path / "transcript.jsonl", str(tmp_path / "flag")
    first = subprocess.Popen([sys.executable, str(NODE), str(transcript), flag])
    wait_for(lambda: pauses(transcript) >= 5 or first.poll() is not None, timeout=60, what="the node to poll")
    first.send_signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    Path(flag).touch()
    subprocess.run([sys.executable, str(NODE), str(transcript), flag, "resume"], check=True, timeout=60)
    return transcript, flag


def test_a_crash_resumed_node_replays_without_divergence(crashed_and_resumed: tuple[Path, str]) -> None:
    transcript, flag = crashed_and_resumed
    recorded = read_transcript(transcript)
    (resume,) = [event for event in recorded.events if isinstance(event, ResumeEvent)]
    assert recorded.chain.intact, recorded.chain

    session = ReplaySession(recorded)
    session.crash_at(resume.seq)
    session.note("run", START)
    with pytest.raises(CrashBoundary):  # the first try ends where the kill ended it
        run_node(session, session.host("local"), session.clock(), flag)
    session.crash_at(None)
    session.note("resume", RESUMED_FROM)
    assert run_node(session, session.host("local"), session.clock(), flag) == 0  # the flag was there on resume
    report = session.report()
    assert report.ok, report
    assert report.events_replayed == report.events_total


def test_without_the_boundary_the_cut_node_diverges(crashed_and_resumed: tuple[Path, str]) -> None:
    """What the resume event is for: replayed as one try, the node the kill cut short asks past its recording."""
    transcript, flag = crashed_and_resumed
    session = ReplaySession(read_transcript(transcript))
    session.note("run", START)
    with pytest.raises(Divergence, match="the recording has a node event here"):
        run_node(session, session.host("local"), session.clock(), flag)
