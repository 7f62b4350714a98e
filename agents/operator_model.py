"""Which model the operator chat talks to, and a warning when it is too small to use tools well.

A small model (SmolLM2-135M, the embedded default) fills in tool calls that are structurally valid (guided
JSON sees to that) and useless: it picks tools and arguments at random and answers beside the point. The
operator should know that before trusting a session, and where to point eyas at a capable model.
"""

from __future__ import annotations

from dataclasses import dataclass

from eyas.agents.llm_choice import FIX, MIN_TOOL_PARAMS, LlmChoice, human_count, parameters


@dataclass(frozen=True)
class ModelNotice:
    shown: str  # the model, where it is served, and why it is the one
    warning: str | None  # shown once, at the start of the session


def model_notice(choice: LlmChoice) -> ModelNotice:
    """What the chat shows about its model: which, where and why, and a warning when its name says it is small."""
    model = choice.agent.model
    size = parameters(model)
    if size is None or size >= MIN_TOOL_PARAMS:
        return ModelNotice(choice.shown(), None)
    warning = (
        f"{model} has about {human_count(size)} parameters, too few to use tools well: its tool calls will be "
        f"well-formed but not useful, and its answers unreliable. For real work, {FIX}."
    )
    return ModelNotice(choice.shown(), warning)
