"""The agent LLM's HTTP answer read into what eyas keeps of it, or, when the endpoint answered something that is not
the chat completions API's JSON (a proxy's login page, a cut body, another service, an endless reply), a
description of what came back: its status, content type, size and first characters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openai._legacy_response import LegacyAPIResponse
    from openai.types.chat import ChatCompletion

# Far above any chat answer eyas asks for (max_tokens of text, or a few tool calls), far below what would slow
# the chat down or fill its memory: a longer answer is no answer of the API's.
MAX_ANSWER_BYTES = 8 * 2**20
SHOWN_CHARS = 120


class NotTheApi(ValueError):
    """What came back instead of the API's JSON, in words (the caller names the endpoint and the fix)."""


def compact_answer(raw: LegacyAPIResponse[ChatCompletion]) -> dict[str, Any]:
    """The compact answer of a raw chat completion response; NotTheApi when it is not one."""
    try:
        return compact(raw.parse())
    except (ValueError, TypeError, AttributeError, KeyError):
        raise NotTheApi(came_back(raw)) from None


def came_back(raw: LegacyAPIResponse[ChatCompletion]) -> str:
    response = raw.http_response
    kind = response.headers.get("content-type") or "no content type"
    start = response.content[:SHOWN_CHARS].decode("utf-8", "replace")
    return f"HTTP {response.status_code}, {kind}, {len(response.content):,} bytes beginning {start!r}"


def compact(response: ChatCompletion) -> dict[str, Any]:
    """What eyas reads of an answer, so transcripts stay small."""
    choices = []
    for choice in response.choices:
        calls = [
            call.model_dump(mode="json", include={"id", "type", "function"}) for call in choice.message.tool_calls or []
        ]
        message = {"content": choice.message.content, "tool_calls": calls or None}
        choices.append({"message": message, "finish_reason": choice.finish_reason})
    usage = response.usage.model_dump(include={"prompt_tokens", "completion_tokens"}) if response.usage else None
    return {"model": response.model, "choices": choices, "usage": usage}
