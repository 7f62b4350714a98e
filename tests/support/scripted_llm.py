"""Answers for tests/support/openai_stub.py when it plays the agent LLM: tool calls, structured outputs, failures.

Stand-in: no model capable of driving the agents runs here (the embedded SmolLM2 is real but answers
nonsense), so the agents' logic is tested against scripted answers sent through the real openai SDK
and HTTP. `role` tells which agent sent a request: from its schema name, its tools, or the ping of
LLM.profile(); a test's script answers per role.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from openai_stub import MODEL, OpenAIStub, Reply, Request

# What vLLM answers when a request has tools but the server was started without a tool parser.
VLLM_NO_TOOL_PARSER = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
RESEARCH_TOOLS = {"search", "fetch", "done"}


def tool_names(body: dict[str, Any]) -> set[str]:
    if body.get("tools"):
        return {tool["function"]["name"] for tool in body["tools"]}
    fmt = body.get("response_format") or {}
    if fmt.get("json_schema", {}).get("name") == "Action":
        calls = fmt["json_schema"]["schema"]["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"]
        return {shape["properties"]["name"]["const"] for shape in calls}
    return set()


def role(body: dict[str, Any]) -> str:
    """ping | supervisor | researcher | findings | synthesizer | operator | text."""
    if body.get("tools") and body["messages"][-1].get("content") == "ping":
        return "ping"
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    named = {"ResearchPlan": "supervisor", "Findings": "findings", "Synthesis": "synthesizer"}
    if schema in named:
        return named[schema]
    names = tool_names(body)
    if names:
        return "researcher" if names == RESEARCH_TOOLS else "operator"
    return "text"


def question_of(body: dict[str, Any]) -> str:
    """The question a researcher (or its findings request) works on, from its system prompt."""
    system = body["messages"][0]["content"]
    match = re.search(r"(?:Question|You researched this question): (.+)", system)
    return match.group(1).strip() if match else ""


def guided(body: dict[str, Any]) -> bool:
    return not body.get("tools")


def chat_body(
    message: dict[str, Any], finish: str = "stop", prompt_tokens: int = 11, completion_tokens: int = 7
) -> bytes:
    return json.dumps(
        {
            "id": "scripted",
            "object": "chat.completion",
            "model": MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()


def text(content: str, finish: str = "stop") -> Reply:
    return Reply(body=chat_body({"content": content}, finish))


def structured(value: Any) -> Reply:
    return text(json.dumps(value))


def calls(body: dict[str, Any], *wanted: tuple[str, Any]) -> Reply:
    """Tool calls in the request's own mode: native tool_calls, or the guided JSON answer.
    An argument given as a str is sent as is (so a test can send malformed JSON)."""
    if guided(body):
        items = [{"name": name, "arguments": args} for name, args in wanted]
        return text(json.dumps({"tool_calls": items}))
    tool_calls = [
        {
            "id": f"call_{len(body['messages'])}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for index, (name, args) in enumerate(wanted)
    ]
    return Reply(body=chat_body({"content": None, "tool_calls": tool_calls}, "tool_calls"))


def answer(body: dict[str, Any], content: str) -> Reply:
    """A plain answer in the request's own mode."""
    return text(json.dumps({"answer": content})) if guided(body) else text(content)


def ping(body: dict[str, Any], native: bool) -> Reply:
    """LLM.profile()'s probe: a server with a tool parser answers; vLLM without one refuses with 400."""
    if native:
        return text("pong")
    return error(400, VLLM_NO_TOOL_PARSER)


def error(status: int, message: str) -> Reply:
    return Reply(
        status=status, body=json.dumps({"error": {"message": message, "type": "Error", "code": status}}).encode()
    )


def last_tool_results(body: dict[str, Any]) -> list[str]:
    """The results the agent just received: tool messages (native) or "Result of" user turns (guided)."""
    results = []
    for message in reversed(body["messages"]):
        if message["role"] == "tool":
            results.append(message["content"])
        elif message["role"] == "user" and message["content"].startswith("Result of "):
            results.append(message["content"].split("\n", 1)[1])
        else:
            break
    return list(reversed(results))


def operator_said(body: dict[str, Any]) -> str:
    """The operator's latest words (not a tool result rewritten as a user turn)."""
    for message in reversed(body["messages"]):
        if message["role"] == "user" and not message["content"].startswith("Result of "):
            return message["content"]
    return ""


def listed_sources(body: dict[str, Any]) -> dict[str, list[int]]:
    """The numbers of the sources a findings request lists, by origin."""
    found: dict[str, list[int]] = {}
    for number, origin in re.findall(r"^\[(\d+)\] \((\w+)\)", body["messages"][-1]["content"], re.MULTILINE):
        found.setdefault(origin, []).append(int(number))
    return found


class ResearchTeam:
    """Scripted answers for a research run, per role; keeps every request, to count who asked what."""

    def __init__(self, questions: list[str], *, native: bool = True, summary: str | None = None) -> None:
        self.questions = questions
        self.native = native
        self.summary = summary or "Train with speculators train [1]; serve with --speculative-config [2][99]."
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, request: Request, stub: OpenAIStub) -> Reply:
        body = request.body
        with self._lock:
            self.bodies.append(body)
        asked = role(body)
        if asked == "ping":
            return ping(body, self.native)
        if asked == "supervisor":
            return structured({"questions": [f"{n}. {q}" for n, q in enumerate(self.questions, start=1)]})
        if asked == "researcher":
            if last_tool_results(body):
                return calls(body, ("done", {}))
            return calls(body, ("search", {"query": f"{question_of(body)} flags"}))
        if asked == "findings":
            sources = listed_sources(body)
            host = sources["host"]
            web = sources.get("web", host)  # offline, every source is the host's
            return structured(
                {
                    "summary": f"Answer to: {question_of(body)}",
                    "facts": [
                        {"claim": "Serve the drafter with --speculative-config", "sources": [web[0], host[0]]},
                        {"claim": "A claim citing nothing real", "sources": [99]},
                    ],
                    "disagreements": [f"[{web[0]}] and [{web[-1]}] name different defaults"],
                }
            )
        if asked == "synthesizer":
            return structured({"summary": self.summary, "disagreements": ["The sources agree [1]."]})
        raise AssertionError(f"unexpected request ({asked}): {body['messages'][-1]}")

    def count(self, who: str, question: str | None = None) -> int:
        with self._lock:
            return sum(1 for b in self.bodies if role(b) == who and (question is None or question_of(b) == question))


def operator_script(
    wanted: dict[str, tuple[str, Any]], lead: str, lines: int, otherwise: str
) -> Callable[[Request, OpenAIStub], Reply]:
    """The operator agent's turns: for each line of the operator's in `wanted`, its tool call, then an answer that
    is `lead` and the first `lines` lines of the result; to anything else, `otherwise`."""

    def script(request: Request, stub: OpenAIStub) -> Reply:
        body: dict[str, Any] = request.body
        if role(body) == "ping":
            return ping(body, native=False)
        said = operator_said(body)
        results = last_tool_results(body)
        if said in wanted:
            if results:
                return answer(body, lead + " | ".join(results[0].splitlines()[:lines]))
            return calls(body, wanted[said])
        return answer(body, otherwise)

    return script
