"""The operator session: a conversation with an agent that verifies, reads, lists and launches through tools.

    user -> agent --(no calls)--> END (the operator's turn)
              |--(reads only)--> tools -> agent
              '--(launch, cancel, gate)--> confirm (asks the operator, "yes" to proceed) -> tools -> agent

`confirm` only asks (LangGraph re-runs an interrupted node from its start); the tools node acts. The
conversation is checkpointed, so a session resumed later, or after a crash, continues where it was,
an unanswered confirmation included.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from eyas.agents.llm import LLM, LlmProfile
from eyas.agents.prompts import CHARS_PER_TOKEN, tokens
from eyas.agents.structured import Message, tool_spec
from eyas.agents.toolbox import Toolbox, shown
from eyas.tools.recording.boundary import Boundary

TASK = "chat"
YES = ("yes", "y")
SHORT_RESULT = 200  # characters a tool result keeps when the conversation no longer fits the context
# Token counts are estimates (chars / 3); a margin keeps odd text, which tokenizes worse, inside the context.
CONTEXT_MARGIN = 0.8


class ChatState(TypedDict, total=False):
    messages: Annotated[list[Message], operator.add]
    rounds: int  # tool rounds since the operator last spoke
    approval: dict[str, Any] | None  # the operator's answer to the pending confirmation


@dataclass(frozen=True)
class Update:
    """Something the terminal shows as the session advances."""

    kind: Literal["assistant", "call", "result", "confirm"]
    text: str


@dataclass(frozen=True)
class OperatorSettings:
    max_rounds: int = 6  # tool rounds per operator message before the agent must answer
    answer_tokens: int = 600


def build_operator_graph(
    llm: LLM,
    toolbox: Toolbox,
    system: str,
    profile: LlmProfile,
    boundary: Boundary,
    checkpointer: BaseCheckpointSaver | None,
    settings: OperatorSettings | None = None,
) -> CompiledStateGraph:
    settings = settings or OperatorSettings()
    out_tokens = max(64, min(settings.answer_tokens, profile.context_tokens // 3))
    result_chars = int(profile.context_tokens * CHARS_PER_TOKEN / 4)

    # The tools' descriptions take room in every request too (natively or in the guided system prompt).
    tools_tokens = tokens(json.dumps([tool_spec(tool) for tool in toolbox.models]))

    def agent(state: ChatState) -> dict[str, Any]:
        budget = int((profile.context_tokens - out_tokens - tokens(system) - tools_tokens) * CONTEXT_MARGIN)
        window = [{"role": "system", "content": system}, *recent(state["messages"], budget)]
        turn = llm.step(window, toolbox.models, mode=profile.tool_mode, max_tokens=out_tokens)
        return {"messages": [turn.message], "rounds": state.get("rounds", 0) + 1, "approval": None}

    def confirm(state: ChatState) -> dict[str, Any]:
        questions = [q for call in toolbox.calls(state["messages"][-1]) if (q := toolbox.confirmation(call))]
        answer = str(interrupt({"kind": "confirm", "actions": questions})).strip()
        approved = answer.lower() in YES
        decision = "approve" if approved else "reject"
        boundary.cross(
            "approval",
            {"gate": "chat", "plan": questions},
            lambda: {"decision": decision, "reason": answer, "who": "operator"},
        )
        return {"approval": {"approved": approved, "answer": answer}}

    def tools(state: ChatState) -> dict[str, Any]:
        calls = toolbox.calls(state["messages"][-1])
        approval = state.get("approval") or {}
        refused = {
            call.id: f"Not done: the operator did not confirm (they answered {approval.get('answer', '')!r})."
            for call in calls
            if toolbox.confirmation(call) and not approval.get("approved")
        }
        return {"messages": toolbox.run(calls, refused=refused, max_chars=result_chars)}

    def limit(state: ChatState) -> dict[str, Any]:
        text = f"I stopped after {state['rounds']} rounds of tool calls; tell me to go on if you want more."
        return {"messages": [{"role": "assistant", "content": text}]}

    def after_agent(state: ChatState) -> Literal["confirm", "tools", "__end__"]:
        calls = toolbox.calls(state["messages"][-1])
        if not calls:
            return "__end__"  # END, spelled as the Literal above
        return "confirm" if any(toolbox.confirmation(call) for call in calls) else "tools"

    def after_tools(state: ChatState) -> Literal["agent", "limit"]:
        return "limit" if state["rounds"] >= settings.max_rounds else "agent"

    graph = StateGraph(ChatState)
    for name, fn in (("agent", agent), ("tools", tools), ("limit", limit)):
        graph.add_node(name, _recorded(boundary, name, fn))
    # Not noted as a node: it stops at the interrupt (whose id differs on every run) and starts again on the
    # answer; what it decides is recorded once, as the approval crossing.
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", after_agent, ["confirm", "tools", END])
    graph.add_edge("confirm", "tools")
    graph.add_conditional_edges("tools", after_tools, ["agent", "limit"])
    graph.add_edge("limit", END)
    return graph.compile(checkpointer=checkpointer)


def _recorded(boundary: Boundary, name: str, fn: Any) -> Any:
    def node(state: ChatState) -> dict[str, Any]:
        return boundary.node(name, fn, state, task=TASK)

    node.__name__ = name
    return node


def recent(messages: list[Message], budget_tokens: int) -> list[Message]:
    """The newest messages that fit the model's context, from an operator message on (a tool call is never
    cut from its result). The operator's last turn always stays; when even it is too long, its tool results
    are cut short, oldest first."""
    starts = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if not starts:
        return messages
    sizes = [tokens(json.dumps(message)) for message in messages]
    fitting = [start for start in starts if sum(sizes[start:]) <= budget_tokens]
    if fitting:
        return messages[fitting[0] :]
    window = messages[starts[-1] :]
    for index, message in enumerate(window):
        if sum(tokens(json.dumps(m)) for m in window) <= budget_tokens:
            break
        if message["role"] == "tool" and len(message["content"]) > SHORT_RESULT:
            cut = message["content"][:SHORT_RESULT]
            window[index] = {**message, "content": f"{cut}…(cut to fit the model's context)"}
    return window


class OperatorSession:
    """One conversation (a checkpointed thread): send the operator's words, answer confirmations."""

    def __init__(self, graph: CompiledStateGraph, thread_id: str, toolbox: Toolbox) -> None:
        self.graph = graph
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        self.toolbox = toolbox

    def pending(self) -> list[str] | None:
        """The actions waiting for the operator's confirmation, if any."""
        interrupts = self.graph.get_state(self.config).interrupts
        return list(interrupts[0].value["actions"]) if interrupts else None

    def history(self) -> list[Message]:
        return list(self.graph.get_state(self.config).values.get("messages", []))

    def send(self, text: str) -> Iterator[Update]:
        return self._stream({"messages": [{"role": "user", "content": text}], "rounds": 0})

    def answer(self, text: str) -> Iterator[Update]:
        """The operator's answer to the pending confirmation ("yes" proceeds; anything else declines)."""
        return self._stream(Command(resume=text))

    def _stream(self, value: Any) -> Iterator[Update]:
        for update in self.graph.stream(value, self.config, stream_mode="updates"):
            for node, change in update.items():
                if node == "__interrupt__":
                    yield Update("confirm", "\n".join(change[0].value["actions"]))
                    continue
                for message in (change or {}).get("messages", []):
                    yield from self._shown(message)

    def _shown(self, message: Message) -> Iterator[Update]:
        if message["role"] == "tool":
            yield Update("result", message["content"])
        elif message.get("tool_calls"):
            for call in self.toolbox.calls(message):
                yield Update("call", shown(call))
        elif message.get("content"):
            yield Update("assistant", message["content"])
