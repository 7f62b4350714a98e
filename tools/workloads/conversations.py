"""Conversations from the generated JSONL, tokenized with the target's chat template and a loss mask.

Accepted lines: `{"id", "conversations": [{"role", "content"}, ...]}` (also `messages` instead of
`conversations`, and ShareGPT turns `{"from": "human"|"gpt"|..., "value"}`). Trailing non-assistant
turns are dropped; a line without an assistant answer after some context is skipped with a reason.

The loss mask marks what the target itself generated: for each assistant turn, its reasoning and content tokens
and the end-of-turn token (an EOS id of the tokenizer or generation config, e.g. `<|im_end|>`), and nothing
else: not the role header the template writes before the answer (`<|im_start|>assistant\n`), not the
separator after the end-of-turn token (`\n`), which the model never generates. A turn's start is where
the render of the conversation up to it with the generation prompt ends. An assistant turn whose render the
template changes once later turns follow (Qwen3's drops the reasoning of every answer before the last question)
is left out of the loss: the whole render is what the server saw at the last request, where that turn is
context, not an emission; a conversation with no turn left in the loss is skipped.

Reasoning (thinking models): the drafter learns what the server really emits, reasoning included, in the
template's own rendering. A turn's reasoning comes as generate.py keeps it, `reasoning` (or `reasoning_content`)
beside `content`, when the server ran a reasoning parser; without one it is inside `content` already and renders
as written. A template that renders an assistant turn's reasoning (it reads `reasoning_content` or `reasoning`,
as Qwen3's and Kimi-K2's do) is given both names, as vLLM gives them; one that ignores them (found by rendering a
probe turn once) gets the reasoning back inside the content, between THINK_TAGS, the tags the reasoning parser
took off (DeepSeek-R1's, Qwen3's and Kimi-K2's alike), so the text is the model's own output again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
THINK_TAGS = ("<think>", "</think>")  # around an answer's reasoning, for a template that does not render it
_PROBE = "eyas-reasoning-probe"


@dataclass(frozen=True)
class Conversation:
    line: int  # 0-based line number in the JSONL
    sample_id: str
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class Skipped:
    line: int
    reason: str


@dataclass(frozen=True)
class Tokenized:
    token_ids: list[int]
    loss_mask: list[bool]

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask)


def read_conversations(path: Path) -> Iterator[Conversation | Skipped]:
    """Every line of the file, as a conversation or as the reason it cannot be used."""
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                yield Skipped(line_number, "not JSON")
                continue
            yield _parse(line_number, record)


def _parse(line_number: int, record: Any) -> Conversation | Skipped:
    if not isinstance(record, dict):
        return Skipped(line_number, "not a JSON object")
    turns = record.get("conversations") or record.get("messages")
    if not isinstance(turns, list):
        return Skipped(line_number, "no conversations list")
    messages = []
    for turn in turns:
        if not isinstance(turn, dict):
            return Skipped(line_number, "a turn is not an object")
        role = ROLES.get(str(turn.get("role", turn.get("from", ""))))
        content = turn.get("content", turn.get("value"))
        reasoning = turn.get("reasoning", turn.get("reasoning_content"))
        if role is None or not isinstance(content, str) or not isinstance(reasoning, str | None):
            return Skipped(line_number, "a turn has an unknown role or non-text content")
        messages.append({"role": role, "content": content, **({"reasoning": reasoning} if reasoning else {})})
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    if not any(message["role"] == "assistant" and answer_text(message) for message in messages[1:]):
        return Skipped(line_number, "no assistant answer after context")
    return Conversation(line_number, str(record.get("id", line_number)), messages)


def end_of_turn_ids(tokenizer: Any, generation_eos: int | list[int] | None) -> set[int]:
    """The tokens that end an assistant turn: the tokenizer's EOS and the generation config's EOS ids."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif isinstance(generation_eos, list):
        ids.update(generation_eos)
    return ids


def answer_text(message: dict[str, str]) -> str:
    return message.get("reasoning", "") + message["content"]


@cache
def renders_reasoning(tokenizer: Any) -> bool:
    """Whether the chat template writes an assistant turn's `reasoning_content` (or `reasoning`) itself."""
    probe = [{"role": "user", "content": "?"}, {"role": "assistant", "content": "!", **reasoning_fields(_PROBE)}]
    return _PROBE in tokenizer.apply_chat_template(probe, tokenize=False)


def reasoning_fields(reasoning: str) -> dict[str, str]:
    return {"reasoning_content": reasoning, "reasoning": reasoning}  # both names, as vLLM passes them


def for_template(tokenizer: Any, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The messages as the chat template takes them: an answer's reasoning in the fields it reads, or back inside
    the content between THINK_TAGS where it reads none."""
    rendered = []
    for message in messages:
        reasoning = message.get("reasoning")
        if not reasoning:
            rendered.append({"role": message["role"], "content": message["content"]})
        elif renders_reasoning(tokenizer):
            rendered.append({"role": message["role"], "content": message["content"], **reasoning_fields(reasoning)})
        else:
            opening, closing = THINK_TAGS
            rendered.append({"role": message["role"], "content": f"{opening}{reasoning}{closing}{message['content']}"})
    return rendered


def tokenize(tokenizer: Any, messages: list[dict[str, str]], end_ids: set[int], max_tokens: int) -> Tokenized:
    """Token ids of the whole conversation and its loss mask, cut to `max_tokens`.

    Raises ValueError when the template's render of a turn's prompt is not where its render of the turn begins.
    """
    messages = for_template(tokenizer, messages)
    token_ids = _render(tokenizer, messages, generation_prompt=False)
    mask = [False] * len(token_ids)
    for turn, message in enumerate(messages):
        if message["role"] != "assistant" or turn == 0:
            continue
        prompt = _render(tokenizer, messages[:turn], generation_prompt=True)
        through_turn = _render(tokenizer, messages[: turn + 1], generation_prompt=False)
        start = len(prompt)
        if through_turn[:start] != prompt:
            raise ValueError(f"the chat template is not prefix-stable at turn {turn}")
        if token_ids[: len(through_turn)] != through_turn:
            continue  # the template renders this answer otherwise once later turns follow: context, not emission
        ends = [index for index in range(start, len(through_turn)) if through_turn[index] in end_ids]
        stop = ends[-1] + 1 if ends else len(through_turn)
        mask[start:stop] = [True] * (stop - start)
    return Tokenized(token_ids[:max_tokens], mask[:max_tokens])


def _render(tokenizer: Any, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=generation_prompt, return_dict=True
    )
    return list(encoded["input_ids"])
