"""The tools an agent may call: each a pydantic model (its arguments) and a function; one turn's calls run
in parallel, each as a task of its own so a transcript replays each in its own order."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from eyas.agents.structured import Call, Message, Tool, tool_name, tool_result, validate_call
from eyas.tools.errors import EyasError
from eyas.tools.recording.task_scope import submit_in_task


@dataclass(frozen=True)
class ToolDef:
    model: Tool
    run: Callable[[Any], str]
    # For tools that launch, cancel or delete: what the operator is asked before the call runs.
    confirm: Callable[[Any], str] | None = None


class Toolbox:
    def __init__(self, defs: list[ToolDef]) -> None:
        self._defs = {tool_name(d.model): d for d in defs}

    @property
    def models(self) -> list[Tool]:
        return [d.model for d in self._defs.values()]

    def calls(self, message: Message) -> list[Call]:
        """The calls of an assistant message, arguments validated again into their models."""
        models = {name: d.model for name, d in self._defs.items()}
        return [
            validate_call(models, raw["id"], raw["function"]["name"], raw["function"]["arguments"])
            for raw in message.get("tool_calls") or []
        ]

    def confirmation(self, call: Call) -> str | None:
        """The question for the operator when `call` launches, cancels or deletes; None when it does not."""
        confirm = self._defs[call.name].confirm
        return confirm(call.arguments) if confirm else None

    def run(self, calls: list[Call], *, refused: dict[str, str], max_chars: int) -> list[Message]:
        """Run the calls at once (those in `refused` are answered with its text instead); one result each.
        An EyasError becomes the call's result, so the agent can tell the operator what went wrong."""
        if not calls:
            return []

        def one(call: Call) -> str:
            if call.id in refused:
                return refused[call.id]
            try:
                text = self._defs[call.name].run(call.arguments)
            except EyasError as exc:
                text = f"Error: {exc}"
            return (
                text if len(text) <= max_chars else f"…(first {len(text) - max_chars} chars cut)\n{text[-max_chars:]}"
            )

        with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="tool") as pool:
            futures = [submit_in_task(pool, f"tool-{index}-{call.name}", one, call) for index, call in enumerate(calls)]
            return [tool_result(call.id, future.result()) for call, future in zip(calls, futures, strict=True)]


def shown(call: Call) -> str:
    """A call as the terminal shows it: verify(checks=['disk'])."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in call.arguments.model_dump(exclude_defaults=True).items())
    return f"{call.name}({arguments})"
