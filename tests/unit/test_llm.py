"""The agent LLM client through the real openai SDK and HTTP, against a scripted server on loopback.

Stand-in: tests/support/openai_stub.py plays the model (see scripted_llm.py for why); the client, the SDK and
the transcript machinery are the real ones. Retries use a tiny backoff, so no test waits for long.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import scripted_llm as s
from eyas.agents.llm import LLM, LlmBadOutput, LlmNotApi, LlmRejected, LlmUnavailable, RetryPolicy, Usage
from eyas.agents.structured import tool_result
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import AgentConfig
from offline import world_watch
from openai_stub import MODEL, OpenAIStub, Reply, Request
from virtual_clock import VirtualClock

FAST_RETRY = RetryPolicy(attempts=4, base_s=0.001, cap_s=0.01)


class Plan(BaseModel):
    questions: list[str] = Field(min_length=1)


class Lookup(BaseModel):
    """Look something up."""

    query: str
    limit: int = 3


def client(stub: OpenAIStub, **options: Any) -> LLM:
    return LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), retry=FAST_RETRY, **options)


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You help."}, {"role": "user", "content": text}]


def test_structured_answer_is_validated_into_the_model() -> None:
    seen: list[dict[str, Any]] = []

    def script(request: Request, stub: OpenAIStub) -> Reply:
        seen.append(request.body)
        return s.structured({"questions": ["Which flags serve EAGLE-3?"]})

    with OpenAIStub(script) as stub:
        plan = client(stub).structured(ask("plan it"), Plan, max_tokens=50)
    assert plan.questions == ["Which flags serve EAGLE-3?"]
    fmt = seen[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Plan"
    assert fmt["json_schema"]["schema"]["properties"]["questions"]["minItems"] == 1
    assert seen[0]["max_completion_tokens"] == 50


def test_native_tool_calls_come_back_as_models() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        assert request.body["tools"][0]["function"]["name"] == "lookup"
        return s.calls(request.body, ("lookup", {"query": "eagle3"}), ("lookup", {"query": "vllm", "limit": 1}))

    with OpenAIStub(script) as stub:
        turn = client(stub).step(ask("find"), [Lookup], mode="native", max_tokens=50)
    assert [call.arguments for call in turn.calls] == [Lookup(query="eagle3"), Lookup(query="vllm", limit=1)]
    assert turn.message["tool_calls"][1]["function"]["name"] == "lookup"


def test_a_server_without_tool_parser_is_driven_by_guided_json() -> None:
    """vLLM without --tool-call-parser refuses `tools=` (400): profile() says guided, and a guided step
    sends the tools in the system prompt and a JSON schema instead, and reads the calls from the JSON."""
    seen: list[dict[str, Any]] = []

    def script(request: Request, stub: OpenAIStub) -> Reply:
        seen.append(request.body)
        if s.role(request.body) == "ping":
            return s.ping(request.body, native=False)
        return s.calls(request.body, ("lookup", {"query": "eagle3"}))

    with OpenAIStub(script) as stub:
        llm = client(stub)
        profile = llm.profile()
        assert profile.tool_mode == "guided"
        conversation = ask("find")
        turn = llm.step(conversation, [Lookup], mode="guided", max_tokens=50)
        conversation += [turn.message, tool_result(turn.calls[0].id, "found 3 pages")]
        llm.step(conversation, [Lookup], mode="guided", max_tokens=50)
    guided = seen[-1]
    assert "tools" not in guided and guided["response_format"]["json_schema"]["name"] == "Action"
    assert "lookup(query, limit?): Look something up." in guided["messages"][0]["content"]
    # The earlier call and its result, rewritten for a server that knows no tool messages.
    assert json.loads(guided["messages"][2]["content"]) == {
        "tool_calls": [{"name": "lookup", "arguments": turn.calls[0].arguments.model_dump()}]
    }
    assert guided["messages"][3] == {"role": "user", "content": "Result of lookup:\nfound 3 pages"}
    assert turn.calls[0].arguments == Lookup(query="eagle3")


@pytest.mark.parametrize("mode", ["native", "guided"])
def test_malformed_tool_arguments_get_one_repair_round(mode: str) -> None:
    bodies: list[dict[str, Any]] = []

    def script(request: Request, stub: OpenAIStub) -> Reply:
        bodies.append(request.body)
        if len(bodies) == 1:
            bad = '{"query": 5' if mode == "native" else {"query": ["not", "a", "string"]}
            return s.calls(request.body, ("lookup", bad))
        return s.calls(request.body, ("lookup", {"query": "fixed"}))

    with OpenAIStub(script) as stub:
        turn = client(stub).step(ask("find"), [Lookup], mode=mode, max_tokens=50)  # type: ignore[arg-type]
    assert turn.calls[0].arguments == Lookup(query="fixed")
    told = json.dumps(bodies[1]["messages"][-1])
    assert "arguments of lookup are invalid" in told


def test_arguments_malformed_twice_are_a_clear_error() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        return s.calls(request.body, ("lookup", {"limit": "many"}))

    with OpenAIStub(script) as stub, pytest.raises(LlmBadOutput) as raised:
        client(stub).step(ask("find"), [Lookup], mode="native", max_tokens=50)
    message = str(raised.value)
    assert "even after being told what was wrong" in message and "query" in message and "limit" in message
    assert stub.requests == 2


def test_an_empty_answer_is_repaired_once_then_an_error() -> None:
    def repaired(request: Request, stub: OpenAIStub) -> Reply:
        return s.text("") if stub.requests == 1 else s.structured({"questions": ["q"]})

    with OpenAIStub(repaired) as stub:
        assert client(stub).structured(ask("plan"), Plan, max_tokens=50).questions == ["q"]

    def empty(request: Request, stub: OpenAIStub) -> Reply:
        return s.text("")

    with OpenAIStub(empty) as stub, pytest.raises(LlmBadOutput, match="empty"):
        client(stub).step(ask("hello"), [Lookup], mode="native", max_tokens=50)


def test_a_429_and_5xx_burst_is_retried_with_backoff() -> None:
    burst = {1: 429, 2: 503, 3: 502}

    def script(request: Request, stub: OpenAIStub) -> Reply:
        if request.attempt in burst:
            return s.error(burst[request.attempt], "busy")
        return s.structured({"questions": ["after the burst"]})

    usage = Usage()
    with OpenAIStub(script) as stub:
        plan = client(stub, usage=usage).structured(ask("burst"), Plan, max_tokens=50)
        assert stub.attempts["burst"] == 4
    assert plan.questions == ["after the burst"]
    assert usage.as_dict()["calls"] == 1  # the retries are one call


def test_retries_are_bounded_and_the_error_says_what_to_do() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        return s.error(503, "overloaded")

    heard: list[str] = []
    with OpenAIStub(script) as stub, pytest.raises(LlmUnavailable) as raised:
        client(stub, on_retry=heard.append).structured(ask("down"), Plan, max_tokens=50)
    assert stub.attempts["down"] == FAST_RETRY.attempts
    assert [line.rsplit(" (", 1)[1] for line in heard] == ["2 of 4)", "3 of 4)", "4 of 4)"]  # an overloaded server
    assert "HTTP 503: overloaded" in str(raised.value) and stub.url in str(raised.value)


def test_the_waits_double_up_to_the_cap_and_a_servers_retry_after_is_heeded_within_it() -> None:
    """The waits go through the injected clock (a replay and a test never sleep): 0.5, 1, 2 s doubling, at most
    the cap; a Retry-After replaces the backoff, and is capped too."""
    burst = {1: 503, 2: 502, 3: 429, 4: 429}
    after = {3: "3", 4: "120"}

    def script(request: Request, stub: OpenAIStub) -> Reply:
        if request.attempt in burst:
            return dataclasses.replace(s.error(burst[request.attempt], "busy"), retry_after=after.get(request.attempt))
        return s.structured({"questions": ["after the burst"]})

    clock = VirtualClock()
    policy = RetryPolicy(attempts=5, base_s=0.5, cap_s=8.0)
    with OpenAIStub(script) as stub:
        llm = LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), retry=policy, clock=clock)
        assert llm.structured(ask("burst"), Plan, max_tokens=50).questions == ["after the burst"]
    assert clock.sleeps == [0.5, 1.0, 3.0, 8.0]


def test_a_server_that_cannot_answer_api_json_is_not_retried() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(body=b"<html>login</html>")

    clock = VirtualClock()
    with OpenAIStub(script) as stub, pytest.raises(LlmNotApi, match="not the chat completions API"):
        LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), clock=clock).complete(
            {"model": MODEL, "messages": ask("page")}
        )
    assert stub.attempts["page"] == 1 and clock.sleeps == []


def test_a_hanging_server_times_out_into_retries() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(delay_s=5.0)

    with OpenAIStub(script) as stub, pytest.raises(LlmUnavailable, match=r"no complete answer within 0\.3 s"):
        LLM(
            AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None),
            retry=RetryPolicy(attempts=2, base_s=0.001),
            timeout_s=0.3,
        ).structured(ask("hang"), Plan, max_tokens=50)


def test_a_server_that_keeps_timing_out_is_given_up_after_two_tries_and_each_retry_is_said() -> None:
    """A trickling or overloaded agent LLM (issue 28 item 7: five silent tries of 180 s) costs two deadlines, and the
    operator hears why the second try happens."""

    def script(request: Request, stub: OpenAIStub) -> Reply:
        return Reply(delay_s=5.0)

    heard: list[str] = []
    with OpenAIStub(script) as stub, pytest.raises(LlmUnavailable, match=r"no answer in 2 tries") as raised:
        LLM(
            AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), retry=FAST_RETRY, timeout_s=0.3,
            on_retry=heard.append,
        ).structured(ask("trickle"), Plan, max_tokens=50)  # fmt: skip
    assert stub.attempts["trickle"] == 2 and FAST_RETRY.attempts == 4
    # The count is the tries a timing-out request gets (2), not the tries an overloaded one gets (4).
    assert heard == [f"the agent LLM at {stub.url}: no complete answer within 0.3 s; trying again (2 of 2)"]
    assert "no complete answer within 0.3 s" in str(raised.value)


def test_a_refusal_is_not_retried_and_names_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EYAS_TEST_AGENT_KEY", "sk-test-not-a-real-key-000000000000")

    def script(request: Request, stub: OpenAIStub) -> Reply:
        return s.error(401, "invalid api key")

    with OpenAIStub(script) as stub, pytest.raises(LlmRejected, match="Set EYAS_TEST_AGENT_KEY") as raised:
        LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env="EYAS_TEST_AGENT_KEY")).structured(
            ask("key"), Plan, max_tokens=50
        )
    assert stub.attempts["key"] == 1
    assert "sk-test" not in str(raised.value)


def test_usage_is_summed_over_threads() -> None:
    def script(request: Request, stub: OpenAIStub) -> Reply:
        return s.structured({"questions": ["q"]})

    usage = Usage()
    with OpenAIStub(script) as stub:
        llm = client(stub, usage=usage)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda n: llm.structured(ask(f"q{n}"), Plan, max_tokens=9), range(8)))
    assert usage.as_dict() == {"calls": 8, "prompt_tokens": 88, "completion_tokens": 56, "total_tokens": 144}


def test_calls_are_recorded_and_replayed_without_the_server(tmp_path: Path) -> None:
    """Every request is one "llm" event (a 429 retried inside it included); replay answers from the
    transcript with no server at all, and reaches nothing."""
    path = tmp_path / "transcript.jsonl"

    def script(request: Request, stub: OpenAIStub) -> Reply:
        if s.role(request.body) == "ping":
            return s.ping(request.body, native=True)
        if request.attempt == 1:
            return s.error(429, "slow down")
        return s.calls(request.body, ("lookup", {"query": "recorded"}))

    recorder = Recorder.open(path)
    with OpenAIStub(script) as stub:
        live = client(stub, boundary=recorder)
        profile = live.profile()
        turn = live.step(ask("record me"), [Lookup], mode=profile.tool_mode, max_tokens=50)
    recorder.close()
    events = read_transcript(path).events
    assert [event.kind for event in events] == ["llm", "llm", "llm"]  # ping, models, the step

    session = ReplaySession.load(path)
    with world_watch() as attempts:
        replayed = LLM(AgentConfig(base_url=stub.url, model=MODEL, api_key_env=None), boundary=session)
        again = replayed.step(ask("record me"), [Lookup], mode=replayed.profile().tool_mode, max_tokens=50)
    assert again.calls == turn.calls and attempts == []
    assert session.report().ok
