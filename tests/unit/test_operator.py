"""The operator session in process: tools on a real host, parallel calls, confirmation before launching,
checkpointed conversations, recorded approvals.

Stand-ins: the agent LLM (tests/support/openai_stub.py, scripted: see scripted_llm.py) and the pipeline's controls
(graph/ implements them; here a recorder of what was asked, which can hold calls at a barrier to prove
they run at the same time). The tools themselves run for real on LocalHost.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

import scripted_llm as s
from eyas.agents.llm import LLM, LlmBadOutput, RetryPolicy
from eyas.agents.operator import OperatorSession, OperatorSettings, build_operator_graph, recent
from eyas.agents.operator_tools import OperatorEnv, operator_tools
from eyas.agents.toolbox import Toolbox
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.transcript import ApprovalEvent
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import AgentConfig, EyasConfig, HostConfig, TargetConfig
from openai_stub import MODEL, OpenAIStub, Reply, Request

Script = Callable[[dict[str, Any]], Reply]


class Controls:
    """Stand-in for the pipeline's controls: remembers what it was asked; status() can wait at a barrier."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier = barrier
        self.started: list[str] = []
        self.answers: list[tuple[str, str]] = []

    def status(self) -> str:
        if self.barrier is not None:
            self.barrier.wait()
        return "phase plan, waiting at the data gate"

    def start_run(self, sizes: dict[str, int]) -> str:
        self.started.append(json.dumps(sizes))
        return f"started with {json.dumps(sizes)}"

    def resume(self) -> str:
        return "resumed"

    def answer_gate(self, action: Literal["approve", "reject"], reason: str) -> str:
        self.answers.append((action, reason))
        return f"gate {action}d"


def config(tmp_path: Path) -> EyasConfig:
    return EyasConfig(
        hosts={"local": HostConfig(address="local", python=sys.executable, workdir=str(tmp_path / "work"))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="target"),
    )


@contextmanager
def session(
    tmp_path: Path, script: Script, controls: Controls, *, native: bool = True, boundary: Boundary | None = None
) -> Iterator[OperatorSession]:
    """A session on a scripted model; a second one on the same folder continues the same conversation."""

    def answer(request: Request, stub: OpenAIStub) -> Reply:
        return s.ping(request.body, native) if s.role(request.body) == "ping" else script(request.body)

    boundary = boundary or Boundary()
    cfg = config(tmp_path)
    host = LocalHost()
    env = OperatorEnv(cfg, lambda name: host, HttpClient(), SYSTEM_CLOCK, control=controls)
    toolbox = Toolbox(operator_tools(env))
    connection = sqlite3.connect(tmp_path / "chat.sqlite", check_same_thread=False)
    with OpenAIStub(answer) as stub:
        llm = LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), boundary=boundary,
                  retry=RetryPolicy(attempts=2, base_s=0.001))  # fmt: skip
        graph = build_operator_graph(
            llm,
            toolbox,
            "You are eyas.",
            llm.profile(),
            boundary,
            SqliteSaver(connection),
            OperatorSettings(max_rounds=3),
        )
        yield OperatorSession(graph, "chat-1", toolbox)
    connection.close()


def said(updates: Iterator[Any]) -> list[tuple[str, str]]:
    return [(update.kind, update.text) for update in updates]


def test_independent_tool_calls_run_at_the_same_time_on_the_real_host(tmp_path: Path) -> None:
    """Two status calls wait at a barrier for each other, beside a real disk check and a job listing:
    the turn completes, so they ran at once; the model gets every result."""

    def script(body: dict[str, Any]) -> Reply:
        results = s.last_tool_results(body)
        if results:
            return s.answer(body, f"Seen {len(results)} results; disk: {results[0].splitlines()[0]}")
        return s.calls(
            body, ("verify", {"checks": ["disk"]}), ("list_jobs", {}), ("run_status", {}), ("run_status", {})
        )

    with session(tmp_path, script, Controls(threading.Barrier(2, timeout=30))) as chat:
        updates = said(chat.send("how is the host?"))
    assert [kind for kind, _ in updates] == ["call"] * 4 + ["result"] * 4 + ["assistant"]
    assert updates[0] == ("call", "verify(checks=['disk'])")
    results = [text for kind, text in updates if kind == "result"]
    assert results[0].startswith("disk: ")  # the real check's finding
    assert results[1] == "No jobs on local."
    assert results[2] == results[3] == "phase plan, waiting at the data gate"
    assert updates[-1][1].startswith("Seen 4 results; disk: disk: ")


STARTING = "start the pipeline run in the background, stopping at its first gate: eyas run --samples 5000"


@pytest.mark.parametrize("native", [True, False], ids=["native-tools", "guided-json"])
def test_launching_waits_for_yes_and_the_refusal_reaches_the_agent(tmp_path: Path, native: bool) -> None:
    def script(body: dict[str, Any]) -> Reply:
        results = s.last_tool_results(body)
        if results:
            return s.answer(body, f"Outcome: {results[-1]}")
        return s.calls(body, ("start_run", {"samples": 5000}))

    controls = Controls()
    path = tmp_path / "transcript.jsonl"
    recorder = Recorder.open(path)
    with session(tmp_path, script, controls, native=native, boundary=recorder) as chat:
        assert said(chat.send("start a run of 5000 samples")) == [
            ("call", "start_run(samples=5000)"),
            ("confirm", STARTING),
        ]
        assert chat.pending() == [STARTING] and controls.started == []
        declined = said(chat.answer("no, not yet"))
        assert controls.started == []
        assert declined[-1] == (
            "assistant",
            "Outcome: Not done: the operator did not confirm (they answered 'no, not yet').",
        )
        said(chat.send("now start it"))
        assert chat.pending() == [STARTING]
        assert said(chat.answer("yes"))[-1] == ("assistant", 'Outcome: started with {"samples": 5000}')
        assert controls.started == ['{"samples": 5000}'] and chat.pending() is None
    recorder.close()
    approvals = [e for e in read_transcript(path).events if isinstance(e, ApprovalEvent)]
    assert [(a.decision, a.reason, a.plan) for a in approvals] == [
        ("reject", "no, not yet", [STARTING]),
        ("approve", "yes", [STARTING]),
    ]


def test_a_pending_confirmation_survives_a_restart(tmp_path: Path) -> None:
    """The operator leaves (or eyas crashes) while asked to confirm; a new session on the same checkpoint
    shows the conversation and asks again; "yes" then cancels the real job."""

    def script(body: dict[str, Any]) -> Reply:
        if s.last_tool_results(body):
            return s.answer(body, "done")
        return s.calls(body, ("cancel_job", {"job_id": "train-1"}))

    with session(tmp_path, script, Controls()) as chat:
        said(chat.send("cancel the training"))
        assert chat.pending() == ["cancel job train-1 on host 'local'"]
    with session(tmp_path, script, Controls()) as again:
        assert again.pending() == ["cancel job train-1 on host 'local'"]
        assert again.history()[0] == {"role": "user", "content": "cancel the training"}
        updates = said(again.answer("yes"))
    assert ("result", "train-1: absent") in updates  # no such job: cancelling it is a no-op, said plainly


def test_a_gate_is_answered_only_after_yes(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Reply:
        if s.last_tool_results(body):
            return s.answer(body, "answered")
        return s.calls(body, ("answer_gate", {"action": "approve", "reason": "fits the disk"}))

    controls = Controls()
    with session(tmp_path, script, controls) as chat:
        said(chat.send("approve the gate"))
        assert chat.pending() == ["approve the pending gate (fits the disk)"] and controls.answers == []
        said(chat.answer("YES"))
    assert controls.answers == [("approve", "fits the disk")]


def test_malformed_arguments_twice_are_a_clear_error_and_the_chat_goes_on(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Reply:
        if s.operator_said(body) == "tail it":
            return s.calls(body, ("tail_log", {"job_id": "x", "lines": "all of them"}))
        return s.answer(body, "still here")

    with session(tmp_path, script, Controls()) as chat:
        with pytest.raises(LlmBadOutput, match=r"tail_log are invalid: lines"):
            said(chat.send("tail it"))
        assert said(chat.send("are you there?")) == [("assistant", "still here")]


def test_tool_rounds_are_bounded_per_message(tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Reply:
        return s.calls(body, ("list_jobs", {}))  # a model that never stops calling

    with session(tmp_path, script, Controls()) as chat:
        updates = said(chat.send("loop"))
    assert updates[-1] == ("assistant", "I stopped after 3 rounds of tool calls; tell me to go on if you want more.")
    assert [kind for kind, _ in updates].count("call") == 3


def test_the_window_keeps_the_newest_turns_whole() -> None:
    messages = [
        {"role": "user", "content": "a" * 300},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "x", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "b" * 300},
        {"role": "user", "content": "second"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "function": {"name": "x", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "c" * 900},
        {"role": "assistant", "content": "ok"},
    ]
    assert recent(messages, 10_000) == messages
    assert recent(messages, 400) == messages[3:]  # the first turn does not fit: it goes whole
    shrunk = recent(messages, 150)  # not even the last turn fits: its tool results are cut short
    assert [m["role"] for m in shrunk] == ["user", "assistant", "tool", "assistant"]
    assert shrunk[2]["content"] == "c" * 200 + "…(cut to fit the model's context)"
    assert messages[5]["content"] == "c" * 900  # the conversation itself keeps everything
