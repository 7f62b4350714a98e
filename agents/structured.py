"""Tools and structured answers as pydantic models: their JSON schemas, and reading a model's answer back.

Two ways to ask a model for a tool call: natively (`tools=`, for servers with a tool-call parser) or
guided (`response_format` json_schema: the answer is JSON that either calls tools or answers in text;
vLLM without a tool parser, the embedded SmolLM2 server among them). Conversations are kept in the
native OpenAI format either way; `render_guided` rewrites them for a guided request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

Tool = type[BaseModel]
ToolMode = Literal["native", "guided"]
M = TypeVar("M", bound=BaseModel)
Message = dict[str, Any]

MAX_GUIDED_CALLS = 4
# Characters of a JSON answer per output token, on the low side (indentation and escapes cost tokens):
# schemas sized with it close within the token limit even when a small model rambles to the maximum.
OUTPUT_CHARS_PER_TOKEN = 2


class OutputProblem(Exception):
    """The model's answer cannot be used; the message is written for the model (sent back in a repair round)."""


class BadCalls(OutputProblem):
    """Native tool calls with invalid arguments: the repair round answers each call with its problem."""

    def __init__(self, problems: list[tuple[str, str]], message: Message) -> None:
        self.problems = problems
        self.message = message
        super().__init__("; ".join(problem for _, problem in problems))


def tool_name(tool: Tool) -> str:
    """WebSearch -> web_search: the name the model sees."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", tool.__name__).lower()


def schema_of(model: Tool) -> dict[str, Any]:
    """The model's JSON schema with every $ref inlined, so it can be nested inside another schema."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            # "title" annotations go (pydantic adds one everywhere); a property named "title" stays.
            return {
                key: inline(value) for key, value in node.items() if not (key == "title" and isinstance(value, str))
            }
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return inline(schema)


def describe(tool: Tool) -> str:
    return " ".join((tool.__doc__ or tool_name(tool)).split())


def tool_spec(tool: Tool) -> dict[str, Any]:
    """The native `tools=` entry."""
    return {
        "type": "function",
        "function": {"name": tool_name(tool), "description": describe(tool), "parameters": _parameters(tool)},
    }


def _parameters(tool: Tool) -> dict[str, Any]:
    """The arguments' schema, without the docstring (it is the tool's description already)."""
    schema = schema_of(tool)
    schema.pop("description", None)
    return schema


def response_format(model: Tool) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": schema_of(model)}}


def action_format(tools: list[Tool], max_tokens: int) -> dict[str, Any]:
    """Guided tool calling: the answer is {"tool_calls": [...]} or {"answer": "..."} (fitting max_tokens)."""
    call_shapes = [
        {
            "type": "object",
            "properties": {"name": {"const": tool_name(tool)}, "arguments": _parameters(tool)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    calls = {"type": "array", "minItems": 1, "maxItems": MAX_GUIDED_CALLS, "items": {"anyOf": call_shapes}}
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool_calls": calls},
                "required": ["tool_calls"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"answer": {"type": "string", "maxLength": max_tokens * OUTPUT_CHARS_PER_TOKEN}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        ]
    }
    return {"type": "json_schema", "json_schema": {"name": "Action", "schema": schema}}


def tools_briefing(tools: list[Tool]) -> str:
    """What a guided request adds to the system prompt: the tools, since the server does not show them."""
    lines = [
        "You can call tools. To call them answer with JSON "
        '{"tool_calls": [{"name": TOOL, "arguments": {...}}]}; to answer without tools, {"answer": TEXT}. Tools:'
    ]
    for tool in tools:
        fields = ", ".join(f"{name}{'' if info.is_required() else '?'}" for name, info in tool.model_fields.items())
        lines.append(f"- {tool_name(tool)}({fields}): {describe(tool)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: BaseModel


@dataclass(frozen=True)
class Turn:
    """One assistant turn: text, tool calls, and the message to append to the conversation."""

    content: str
    calls: list[Call] = field(default_factory=list)
    message: Message = field(default_factory=dict)


def tool_result(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def assistant_message(content: str | None, calls: list[tuple[str, str, str]]) -> Message:
    """`calls` are (id, name, arguments as a JSON string)."""
    message: Message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        ]
    return message


def render_guided(messages: list[Message], tools: list[Tool]) -> list[Message]:
    """The conversation as a server without tool calling reads it: calls as JSON text, results as user turns."""
    names: dict[str, str] = {}
    rendered: list[Message] = []
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                names[call["id"]] = call["function"]["name"]
                calls.append({"name": call["function"]["name"], "arguments": json.loads(call["function"]["arguments"])})
            rendered.append({"role": "assistant", "content": json.dumps({"tool_calls": calls})})
        elif message["role"] == "tool":
            name = names.get(message["tool_call_id"], "a tool")
            rendered.append({"role": "user", "content": f"Result of {name}:\n{message['content']}"})
        else:
            rendered.append(message)
    if tools:
        briefing = tools_briefing(tools)
        if rendered and rendered[0]["role"] == "system":
            rendered[0] = {"role": "system", "content": f"{rendered[0]['content']}\n\n{briefing}"}
        else:
            rendered.insert(0, {"role": "system", "content": briefing})
    return rendered


def parse_structured(content: str | None, model: type[M], finish_reason: str | None) -> M:
    if not content or not content.strip():
        raise OutputProblem("The answer was empty. Answer with JSON matching the schema.")
    try:
        return model.model_validate_json(content)
    except ValidationError as exc:
        cut = " It was cut off at the token limit: answer more briefly." if finish_reason == "length" else ""
        raise OutputProblem(f"The answer is not a valid {model.__name__}: {_problems(exc)}.{cut}") from None


def validate_call(tools: dict[str, Tool], call_id: str, name: str, arguments: str | dict[str, Any]) -> Call:
    tool = tools.get(name)
    if tool is None:
        raise OutputProblem(f"There is no tool named {name!r}; the tools are {', '.join(tools)}.")
    try:
        parsed = (
            tool.model_validate(arguments)
            if isinstance(arguments, dict)
            else tool.model_validate_json(arguments or "{}")
        )
    except ValidationError as exc:
        raise OutputProblem(f"The arguments of {name} are invalid: {_problems(exc)}.") from None
    return Call(call_id, name, parsed)


def parse_native(message: Message, tools: list[Tool]) -> Turn:
    by_name = {tool_name(tool): tool for tool in tools}
    content = message.get("content") or ""
    raw_calls = message.get("tool_calls") or []
    calls, problems = [], []
    for raw in raw_calls:
        try:
            calls.append(validate_call(by_name, raw["id"], raw["function"]["name"], raw["function"]["arguments"]))
        except OutputProblem as exc:
            problems.append((raw["id"], str(exc)))
    if problems:
        raise BadCalls(problems, message)
    if not calls and not content.strip():
        raise OutputProblem("The answer was empty. Call a tool or answer in text.")
    triples = [(raw["id"], raw["function"]["name"], raw["function"]["arguments"] or "{}") for raw in raw_calls]
    return Turn(content, calls, assistant_message(content, triples))


def parse_guided(content: str | None, tools: list[Tool], position: int, finish_reason: str | None) -> Turn:
    """`position` (the conversation's length) makes call ids unique and the same on every replay."""
    if not content or not content.strip():
        raise OutputProblem('The answer was empty. Answer {"answer": TEXT} or {"tool_calls": [...]}.')
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        cut = " It was cut off at the token limit: answer more briefly." if finish_reason == "length" else ""
        raise OutputProblem(f"The answer is not valid JSON ({exc.msg}).{cut}") from None
    if not isinstance(data, dict):
        raise OutputProblem('The answer must be a JSON object: {"answer": TEXT} or {"tool_calls": [...]}.')
    if data.get("tool_calls"):
        by_name = {tool_name(tool): tool for tool in tools}
        calls = []
        for index, raw in enumerate(data["tool_calls"]):
            if not isinstance(raw, dict):
                raise OutputProblem("Each tool call must be an object with a name and arguments.")
            args = raw.get("arguments") or {}
            calls.append(validate_call(by_name, f"call_{position}_{index}", str(raw.get("name")), args))
        triples = [(call.id, call.name, call.arguments.model_dump_json()) for call in calls]
        return Turn("", calls, assistant_message(None, triples))
    answer = str(data.get("answer") or "").strip()
    if not answer:
        raise OutputProblem('The answer was empty. Answer {"answer": TEXT} or {"tool_calls": [...]}.')
    return Turn(answer, [], assistant_message(answer, []))


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "(the whole answer)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)
