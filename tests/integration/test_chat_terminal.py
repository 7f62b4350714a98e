"""`eyas chat` as a person uses it: the real terminal program in a pty, talking to a scripted model.

The agent verifies the embedded target (real checks on this machine), is asked to start a phase, asks
the operator first, and launches only after "yes". Stand-ins: the agent LLM (tests/support/openai_stub.py,
scripted like vLLM without a tool parser: guided JSON) and the pipeline's controls (tests/support/chat_driver.py:
starting a phase launches a real detached job). Everything else, the checkpoint and the transcript
included, is the program's own.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import scripted_llm as s
from chat_example import config_text
from eyas.agents.faces.cli.chat import Chat, converse, open_chat
from eyas.graph.life.session import run_meta
from eyas.graph.runs import RunDir
from eyas.tools.config_source import ConfigSource
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobStatus
from eyas.tools.recording.transcript import ApprovalEvent
from eyas.tools.recording.transcript_reader import read_transcript
from openai_stub import OpenAIStub, Reply, Request
from scripted_llm import ResearchTeam
from terminal import Terminal

DRIVER = Path(__file__).resolve().parents[1] / "support" / "chat_driver.py"
STARTING = "start the pipeline run in the background, stopping at its first gate: eyas run --samples 5000"


def script(request: Request, stub: OpenAIStub) -> Reply:
    body: dict[str, Any] = request.body
    if s.role(body) == "ping":
        return s.ping(body, native=False)
    results = s.last_tool_results(body)
    if s.operator_said(body) == "verify the target":
        if results:
            return s.answer(body, "Checked: " + " | ".join(results[0].splitlines()[:2]))
        return s.calls(body, ("verify", {"checks": ["disk", "packages"]}))
    if s.operator_said(body) == "start a run of 5000 samples":
        if results:
            return s.answer(body, f"Result: {results[0]}")
        return s.calls(body, ("start_run", {"samples": 5000}))
    return s.answer(body, "I can verify the host, read files, list jobs and start phases.")


def write_config(path: Path, workdir: Path, agent_url: str, python: str | None = None) -> None:
    path.write_text(config_text(workdir, agent_url, python=python))


@pytest.mark.slow  # its verify runs the packages check in the target venv (`make target`)
def test_the_chat_verifies_then_launches_only_after_yes(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    jobs = Jobs(LocalHost(), str(workdir))
    env = {**os.environ, "EYAS_RUNS_DIR": str(tmp_path / "runs"), "PYTHONUNBUFFERED": "1"}
    with OpenAIStub(script) as stub:
        write_config(tmp_path / "eyas.toml", workdir, stub.url)
        terminal = Terminal([sys.executable, str(DRIVER), str(tmp_path / "eyas.toml")], env, str(tmp_path))
        try:
            terminal.expect(
                r"eyas chat, run run-\S+, talking to stub-model at http://127\.0\.0\.1:\d+/v1 "
                r"\(the config's \[agent\]\)\. Type exit",
                60,
            )
            terminal.expect(r"you> ", 60)
            terminal.send("verify the target")
            terminal.expect(r"  -> verify\(checks=\['disk', 'packages'\]\)", 60)
            disk = terminal.expect(r"  <- disk: (ok|warn|fail): (.+)", 60)
            packages = terminal.expect(r"  <- packages: (ok|warn|fail): (.+)", 60)
            assert packages.group(1) == "ok" and "vllm" in packages.group(2), packages.group(0)
            terminal.expect(r"eyas: Checked: disk: " + disk.group(1), 30)
            terminal.expect(r"you> ", 30)

            terminal.send("start a run of 5000 samples")
            terminal.expect(r"  -> start_run\(samples=5000\)", 30)
            terminal.expect(r"eyas wants to:\n  - " + re.escape(STARTING) + r"\nProceed\? \[yes/no\]\nconfirm> ", 30)
            assert jobs.status("pipeline-run").status is JobStatus.ABSENT  # asked, not launched
            terminal.send("yes")
            terminal.expect(r"eyas: Result: run launched with \{'samples': 5000\}: job pipeline-run running", 60)
            assert jobs.status("pipeline-run").status is JobStatus.RUNNING
            terminal.expect(r"you> ", 30)
            terminal.send("exit")
            assert terminal.proc.wait(timeout=30) == 0
        finally:
            terminal.close()
            jobs.cancel("pipeline-run", grace_s=1)

    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "chat.sqlite").exists()
    events = read_transcript(run / "transcript.jsonl").events
    kinds = {event.kind for event in events}
    assert {"llm", "command", "approval", "node"} <= kinds
    (approval,) = [event for event in events if isinstance(event, ApprovalEvent)]
    assert (approval.decision, approval.plan) == ("approve", [STARTING])


def talk(chat: Chat, *lines: str) -> list[str]:
    """Run the chat loop on these lines as the operator's input (then Ctrl-D); what it shows."""
    pending = iter(lines)
    shown: list[str] = []

    def read(prompt: str) -> str:
        line = next(pending, None)
        if line is None:
            raise EOFError
        shown.append(f"{prompt}{line}")
        return line

    converse(chat, read, shown.append)
    return shown


def test_resume_continues_the_conversation_where_it_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, through the same loop: a chat left while asked to confirm is resumed by `--resume` (history
    shown, the question asked again); a chat beside a pipeline run records apart from the run's transcript."""

    def heard(request: Request, stub: OpenAIStub) -> Reply:
        body = request.body
        if s.role(body) == "ping":
            return s.ping(body, native=True)
        if s.operator_said(body) == "cancel train-1":
            if s.last_tool_results(body):
                return s.answer(body, "cancelled: " + s.last_tool_results(body)[0])
            return s.calls(body, ("cancel_job", {"job_id": "train-1"}))
        told = sum(1 for m in body["messages"] if m["role"] == "user")
        return s.answer(body, f"heard {told}")

    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    with OpenAIStub(heard) as stub:
        write_config(tmp_path / "eyas.toml", tmp_path / "work", stub.url)
        with open_chat(None, False, tmp_path / "eyas.toml") as chat:
            first = talk(chat, "hello", "cancel train-1")  # then the operator leaves at the question
            run_id = chat.run.run_id
        assert "eyas: heard 1" in first and first[-2].endswith("Proceed? [yes/no]")
        with open_chat(None, True, None) as chat:
            resumed = talk(chat, "yes", "anyone?")
        assert resumed[1:4] == ["you: hello", "eyas: heard 1", "you: cancel train-1"]
        assert resumed[4].startswith("eyas wants to:\n  - cancel job train-1") and "confirm> yes" in resumed
        assert "eyas: cancelled: train-1: absent" in resumed and "eyas: heard 3" in resumed
        with open_chat(run_id, False, None) as chat:
            assert "eyas: heard 1" in talk(chat, "new conversation")

        pipeline = RunDir(tmp_path / "runs" / "run-pipeline")
        pipeline.write_meta(run_meta(ConfigSource(tmp_path / "eyas.toml", "from --config"), None, None))
        with open_chat("run-pipeline", False, None) as chat:
            talk(chat, "hello")
    assert (pipeline.root / "chat-transcript.jsonl").exists() and not pipeline.transcript.exists()


def test_the_chat_researches_in_its_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The research tool runs the whole research graph inside the chat's tool call (offline: the real ddgs
    fails) and the agent gets the report's path and summary."""
    team = ResearchTeam(["How does LangGraph checkpoint a graph with a SqliteSaver?"])

    def script(request: Request, stub: OpenAIStub) -> Reply:
        body = request.body
        if s.role(body) != "operator":
            return team(request, stub)
        results = s.last_tool_results(body)
        if results:
            return s.answer(body, results[0].splitlines()[0])
        return s.calls(body, ("research", {"brief": "How do checkpoints work here?"}))

    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    with OpenAIStub(script) as stub:
        write_config(tmp_path / "eyas.toml", tmp_path / "work", stub.url, python=sys.executable)
        with open_chat(None, False, tmp_path / "eyas.toml") as chat:
            shown = talk(chat, "research checkpoints")
            report = chat.run.root / "research.md"
    assert f"eyas: Report: {report} (" in "\n".join(shown)
    assert "Answer to: How does LangGraph checkpoint" in report.read_text()
