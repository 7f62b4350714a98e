"""What every node may use at run time: live objects that are never checkpointed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.errors import ConfigError
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.jobs.detached import JobState
from eyas.tools.jobs.executor import JobExecutor, executor_for
from eyas.tools.jobs.upload import remote_workloads_dir
from eyas.tools.recording.boundary import Boundary
from eyas.tools.settings.config import EyasConfig, HostConfig
from eyas.tools.settings.sizes import POLL_INTERVAL_S


def _ignore(*_: Any) -> None:
    return None


@dataclass
class RunContext:
    config: EyasConfig
    host: Host
    http: HttpClient
    clock: Clock
    run: RunDir
    boundary: Boundary = field(default_factory=Boundary)
    policy: Policy | None = None
    poll_interval_s: float = POLL_INTERVAL_S
    # The terminal shows job progress through this; nothing of it enters the checkpoint.
    on_progress: Callable[[str, list[JobState], dict[str, dict[str, Any]]], None] = field(default=_ignore)
    on_note: Callable[[str], None] = field(default=_ignore)
    _jobs: JobExecutor | None = field(default=None, init=False, repr=False)
    # Told when the host stops answering (its name, since when) and when it answers again (None).
    on_host_outage: Callable[[str, float | None], None] = field(default=_ignore)

    @property
    def host_config(self) -> HostConfig:
        return self.config.host()

    @property
    def jobs(self) -> JobExecutor:
        """Where the run's jobs execute: detached on the host, or on a Ray cluster ([cluster] executor)."""
        if self._jobs is None:
            self._jobs = executor_for(self.config, self.host)
        return self._jobs

    @property
    def remote_run_dir(self) -> str:
        """The run's folder on the host, where its data, hidden states and drafter go."""
        return f"{self.host_config.workdir.rstrip('/')}/runs/{self.run.run_id}"

    @property
    def workloads_dir(self) -> str:
        """Where `upload_workloads` puts the scripts on the host."""
        return remote_workloads_dir(self.host_config.workdir)

    def artifact(self, name: str) -> str:
        """Where an artifact of this run lives on the host; fixed per run, so a resumed run finds it."""
        return f"{self.remote_run_dir}/{ARTIFACTS[name]}"

    @property
    def model_dir(self) -> str:
        model_dir = self.config.target.model_dir
        if model_dir is None:
            raise ConfigError(
                "target.model_dir is not set: extraction and training need the served model's directory on the host."
            )
        return model_dir


class Node(Protocol):
    """A node of the run's graph. langgraph hands it the runtime by name, so the parameter is `runtime`."""

    def __call__(self, state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]: ...


# The compiled run graph, whose nodes get a RunContext (a bare CompiledStateGraph takes no context).
RunGraph = CompiledStateGraph[RunState, RunContext, RunState, RunState]


ARTIFACTS = {
    "conversations": "data/conversations.jsonl",
    "prompt_set": "data/prompt-set.jsonl",
    "prompts": "data/prompts.jsonl",
    "held_out": "data/held-out.jsonl",
    "drafter_base": "drafter-base",
    "hidden_states": "hidden-states",
    "vocab": "vocab",
    "drafter": "drafter",
    "checkpoints": "train-checkpoints",
    "evaluation": "evaluation.json",
}
