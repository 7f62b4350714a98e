"""`eyas replay` of a chat: the operator's recorded lines are typed again, turn by turn, offline, with the same
divergence report as a pipeline run. The agent's LLM in these recordings is the scripted stand-in
(tests/support/chat_example.py says why); the chat program, its tools and the transcript are real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chat_example
from eyas.agents.faces.cli.replay import replay
from eyas.agents.llm_choice import LlmChoice, embedded_choice, parameters
from eyas.agents.operator_model import model_notice
from eyas.tools.recording.transcript import ControlEvent, OperatorEvent
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import AgentConfig

EXAMPLE = Path(__file__).parents[2] / "runs/examples/chat-session/transcript.jsonl"


def test_the_example_chat_replays_clean_turn_by_turn() -> None:
    recorded = read_transcript(EXAMPLE)
    typed = [event.text for event in recorded.events if isinstance(event, OperatorEvent)]
    assert typed == chat_example.LINES
    assert [event.method for event in recorded.events if isinstance(event, ControlEvent)] == ["status"]
    assert recorded.chain.status == "chained" and recorded.chain.intact

    report, state = replay(EXAMPLE)
    assert report.ok, report
    assert report.events_replayed == report.events_total == len(recorded.events)
    said = [message["content"] for message in state["messages"] if message["role"] == "user"]
    assert said[0] == "verify the disk and the binaries" and "start the pipeline" in said


def test_a_changed_typed_line_diverges_at_the_next_request_and_the_chain_names_it(tmp_path: Path) -> None:
    path = tmp_path / "transcript.jsonl"
    events = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    (changed,) = [event for event in events if event["kind"] == "operator" and event["text"] == "list the jobs"]
    changed["text"] = "list the jobs on every host"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))

    report, _ = replay(path)
    assert report.divergence is not None and report.divergence.kind == "llm"
    assert report.divergence.after_seq is not None and report.divergence.seq > changed["seq"]
    assert "list the jobs on every host" in report.divergence.diff
    assert report.chain.first_break is not None
    assert (report.chain.first_break.what, report.chain.first_break.seq) == ("altered", changed["seq"])


def test_a_chat_recorded_now_replays_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    run = chat_example.record("now")
    report, _ = replay(run.transcript)
    assert report.ok, report

    # A chat the operator left with Ctrl-D replays too: the leaving is recorded, not a missing line.
    left = chat_example.record("left", typed=chat_example.LINES[:2])
    last = read_transcript(left.transcript).events[-1]
    assert isinstance(last, OperatorEvent) and last.closed
    report, _ = replay(left.transcript)
    assert report.ok, report


def test_the_chat_names_its_model_and_warns_when_it_is_too_small() -> None:
    notice = model_notice(embedded_choice("no [agent] in the config"))
    assert "SmolLM2-135M-Instruct at http://127.0.0.1:" in notice.shown and "no [agent]" in notice.shown
    assert notice.warning is not None and "135M parameters" in notice.warning and "[agent]" in notice.warning
    large = AgentConfig(base_url="https://api.example.com/v1", model="Qwen/Qwen2.5-72B-Instruct", api_key_env=None)
    assert model_notice(LlmChoice(agent=large, source="config", why="the config's [agent]")).warning is None
    assert parameters("Qwen3-30B-A3B") == 30e9 and parameters("gpt-5.1") is None


def test_a_chat_with_a_tiny_model_warns_once_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    chat_example.record("tiny", typed=["list the jobs", "list the jobs", "exit"], model="SmolLM2-135M-Instruct")
    shown = capsys.readouterr().out
    assert "talking to SmolLM2-135M-Instruct at http://127.0.0.1:" in shown
    assert shown.count("warning: SmolLM2-135M-Instruct has about 135M parameters, too few to use tools well") == 1
    assert "set an [agent] section in the config" in shown
