"""Which LLM the agent (research, the operator chat) talks to, and why, in one sentence the operator is shown.

1. The config's [agent] section, when it has one.
2. Else the target's own server: production is an OpenAI-compatible endpoint, and a model worth a drafter is usually
   worth asking. Only when it serves a capable model (about 7B parameters or more: its name says so, or its
   config.json on the host), and unless `[target] agent_llm = false` keeps the agent's requests off production.
3. Else the embedded target's SmolLM2 server: weak, but real and offline. Research is skipped with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from eyas.tools.errors import EyasError
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient, HttpError
from eyas.tools.launch.api_key import configured_key
from eyas.tools.planning.model_config import model_config_path, read_model_dims
from eyas.tools.planning.served import served_model
from eyas.tools.settings.config import AgentConfig, EyasConfig, TargetConfig
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget

# Below this, open models rarely choose tools and arguments well (a rule of thumb, not a measurement).
MIN_TOOL_PARAMS = 7e9
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*([MBT])(?![A-Za-z])", re.IGNORECASE)
_SCALE = {"m": 1e6, "b": 1e9, "t": 1e12}
FIX = (
    "set an [agent] section in the config (base_url and model of a capable OpenAI-compatible endpoint; "
    "`eyas config init` writes one to fill in)"
)
# The embedded SmolLM2 loops on its own words at temperature 0; vLLM's repetition penalty stops that.
EMBEDDED_SAMPLING: dict[str, Any] = {"temperature": 0.0, "repetition_penalty": 1.3}
OPT_OUT = "`agent_llm = false` in [target] keeps the agent off production"


def parameters(model: str) -> float | None:
    """The parameter count a model's name states ("SmolLM2-135M" -> 1.35e8, "Qwen2.5-72B" -> 7.2e10), if any;
    the largest size in the name counts ("Qwen3-30B-A3B": 30B in all, 3B active)."""
    sizes = [float(number) * _SCALE[unit.lower()] for number, unit in _SIZE.findall(model.split("/")[-1])]
    return max(sizes) if sizes else None


def human_count(count: float) -> str:
    return f"{count / 1e9:.3g}B" if count >= 1e9 else f"{count / 1e6:.3g}M"


class LlmChoice(BaseModel):
    """The agent's endpoint, where it came from, and why, as the run's first lines say it."""

    agent: AgentConfig
    source: Literal["config", "production", "embedded"]
    why: str
    sampling: dict[str, Any] = {}

    @property
    def capable(self) -> bool:
        """Whether it is worth a research phase: the embedded SmolLM2 is not."""
        return self.source != "embedded"

    def shown(self) -> str:
        return f"{self.agent.model} at {self.agent.base_url} ({self.why})"


def choose_llm(config: EyasConfig, http: HttpClient, host: Callable[[], Host]) -> LlmChoice:
    """The agent's LLM for this config: [agent], else production when it serves a capable model, else the embedded
    server. Production's size comes from its name; only a name that states none costs a look at its /v1/models and
    config.json (through `http` and the host `host` opens, so a run records and replays it; a chat whose model is
    chosen otherwise never opens it)."""
    if config.agent is not None:
        return LlmChoice(agent=config.agent, source="config", why="the config's [agent]")
    target = config.target
    if not target.agent_llm:
        return embedded_choice(
            "no [agent] in the config, and [target] agent_llm = false keeps the agent off production"
        )
    size, said_by = production_size(target, http, host)
    if size is None:
        return embedded_choice(f"no [agent] in the config, and production's size is unknown ({said_by})")
    about = f"{target.model}, about {human_count(size)} parameters ({said_by})"
    if round(size / 1e9) * 1e9 < MIN_TOOL_PARAMS:  # counts are estimates: compared in whole billions, as names are
        return embedded_choice(f"no [agent] in the config, and production serves {about}, too few to research well")
    if target.api_key_env is None and wants_a_key(target, http):
        return embedded_choice(
            f"no [agent] in the config, and production serves {about} but wants an API key the agent has not been "
            "given (name it with [target] api_key_env)"
        )
    production = AgentConfig(base_url=f"{target.base_url}/v1", model=target.model, api_key_env=target.api_key_env)
    why = f"production's own server: no [agent] in the config, and it serves {about}; {OPT_OUT}"
    return LlmChoice(agent=production, source="production", why=why)


def embedded_choice(why: str) -> LlmChoice:
    embedded = EmbeddedTarget.from_env()
    agent = AgentConfig(base_url=f"{embedded.base_url}/v1", model=SERVED_MODEL, api_key_env=None)
    return LlmChoice(
        agent=agent, source="embedded", why=f"the embedded model: {why}; {FIX}", sampling=EMBEDDED_SAMPLING
    )


def production_size(target: TargetConfig, http: HttpClient, host: Callable[[], Host]) -> tuple[float | None, str]:
    """Production's parameter count and what said it: its name, else its config.json (the directory /v1/models
    says it loaded); None with the reason when neither can."""
    named = parameters(target.model)
    if named is not None:
        return named, "its name"
    try:
        key = configured_key(target)
        root = served_model(http, target, {"Authorization": f"Bearer {key}"} if key else None).root
        machine = host()
        dims = read_model_dims(machine, model_config_path(machine, root))
    except EyasError as exc:
        return None, f"its name states none, and {exc}"
    return float(dims.active_parameters()), "its config.json, counting the parameters a token passes through"


def wants_a_key(target: TargetConfig, http: HttpClient) -> bool:
    """Whether production refuses a request without a key (its unit's --api-key or VLLM_API_KEY, which eyas's own
    requests read from the unit but the agent's client cannot)."""
    try:
        return http.get(f"{target.base_url}/v1/models").status == 401
    except HttpError:
        return False  # down: the agent's first request says so
