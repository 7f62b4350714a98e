"""Which model the operator chat talks to, and a warning when it is too small to use tools well.

A small model (SmolLM2-135M, the embedded default) fills in tool calls that are structurally valid (guided
JSON sees to that) and useless: it picks tools and arguments at random and answers beside the point. The
operator should know that before trusting a session, and where to point eyas at a capable model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eyas.tools.settings.config import AgentConfig

# Below this, open models rarely choose tools and arguments well (a rule of thumb, not a measurement).
MIN_TOOL_PARAMS = 7e9
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*([MBT])(?![A-Za-z])", re.IGNORECASE)
_SCALE = {"m": 1e6, "b": 1e9, "t": 1e12}
FIX = (
    "set an [agent] section in the config (base_url and model of a capable OpenAI-compatible endpoint; "
    "`eyas config init` writes one to fill in)"
)


@dataclass(frozen=True)
class ModelNotice:
    shown: str  # the model and where it is served
    warning: str | None  # shown once, at the start of the session


def parameters(model: str) -> float | None:
    """The parameter count a model's name states ("SmolLM2-135M" -> 1.35e8, "Qwen2.5-72B" -> 7.2e10), if any;
    the largest size in the name counts ("Qwen3-30B-A3B": 30B in all, 3B active)."""
    sizes = [float(number) * _SCALE[unit.lower()] for number, unit in _SIZE.findall(model.split("/")[-1])]
    return max(sizes) if sizes else None


def model_notice(agent: AgentConfig, configured: bool) -> ModelNotice:
    """What the chat shows about its model; `configured` is False when eyas fell back to the embedded target."""
    shown = f"{agent.model} at {agent.base_url}"
    if not configured:
        shown += " (no [agent] in the config: the embedded target's model)"
    size = parameters(agent.model)
    if size is None or size >= MIN_TOOL_PARAMS:
        return ModelNotice(shown, None)
    warning = (
        f"{agent.model} has about {_human(size)} parameters, too few to use tools well: its tool calls will be "
        f"well-formed but not useful, and its answers unreliable. For real work, {FIX}."
    )
    return ModelNotice(shown, warning)


def _human(count: float) -> str:
    return f"{count / 1e9:g}B" if count >= 1e9 else f"{count / 1e6:g}M"
