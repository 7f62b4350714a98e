"""The run's state read typed: `run_facts(state)` once per node (or per face, from a checkpoint or a state folded
from a transcript), then attributes, instead of string keys with defaults at every reading.

RunState (graph/state.py) is what LangGraph keeps: plain JSON under each key. `RunFacts` is its reading: every key
the graph reads, typed, with the value a run that has not reached the phase that writes it has (an empty mapping,
None). Keys only shown whole (the compat table, the drafter's preparation) stay plain JSON here and are typed where
they are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eyas.graph.state import Decision, DeployOutcome, Failure, Record, RunPlan
from eyas.tools.settings.sizes import Sizes, SizeValue, recorded_sizes


class Check(Record):
    """One of verify's checks: ok, warn or fail, and what it found."""

    status: str
    message: str


class Gpu(BaseModel):
    """One GPU of the host as verify saw it (graph/phases/verify/node.py's gpu_summary)."""

    model_config = ConfigDict(frozen=True)

    index: int
    production: bool = False  # production's vLLM holds it
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None


class Gpus(BaseModel):
    model_config = ConfigDict(frozen=True)

    count: int = 0
    gpus: list[Gpu] = Field(default_factory=list)

    def production_held(self) -> list[int]:
        """The indices of the GPUs production holds."""
        return [gpu.index for gpu in self.gpus if gpu.production]


class Stop(BaseModel):
    """One line of production.jsonl (graph/downtime.py's log_stop): a stop or restart of production."""

    model_config = ConfigDict(frozen=True)

    phase: str = ""
    service: str = ""
    backend: str = ""
    downtime_s: float = 0.0
    load_s: float | None = None
    restarted_because: str = ""


class ProductionLog(BaseModel):
    """graph/downtime.py's summary: whether production is stopped now, and each past stop."""

    model_config = ConfigDict(frozen=True)

    stopped_now: bool = False
    stops: list[Stop] = Field(default_factory=list)

    def last_load_s(self) -> float | None:
        """Production's start-to-healthy time the last time this run restarted it and timed it."""
        return next((stop.load_s for stop in reversed(self.stops) if stop.load_s), None)


class RunFacts(BaseModel):
    """The run's state, typed; a key the run has not written yet reads as empty."""

    model_config = ConfigDict(frozen=True)

    run_id: str | None = None
    phase: str | None = None
    eyas: dict[str, str | None] = Field(default_factory=dict)
    # The sizes key for key as the run recorded them (a run may predate a size), typed by `sizes` when read: a bad
    # size fails the node that uses it, not every node that reads the state.
    recorded_sizes: dict[str, SizeValue] = Field(default_factory=dict, alias="sizes")
    verification: dict[str, Check] = Field(default_factory=dict)
    free_disk_bytes: int | None = None
    gpus: Gpus = Field(default_factory=Gpus)
    trust_remote_code: bool | None = None
    compat: dict[str, Any] = Field(default_factory=dict)
    server_flags: dict[str, Any] = Field(default_factory=dict)
    research_summary: dict[str, Any] | None = None
    plan: RunPlan = Field(default_factory=RunPlan)  # the empty plan before the plan node ran
    plan_at_start: RunPlan | None = None  # the first plan, once the plan was made again from the generated data
    measured: dict[str, Any] | None = None
    jobs: dict[str, list[str]] = Field(default_factory=dict)
    artifacts: dict[str, str] = Field(default_factory=dict)
    decisions: list[Decision] = Field(default_factory=list)
    failure: Failure | None = None
    drafter: dict[str, Any] | None = None
    prompts: dict[str, Any] | None = None
    training: dict[str, list[dict[str, Any]]] | None = None
    online: dict[str, Any] | None = None
    drafter_files: list[dict[str, Any]] | None = None
    evaluation: dict[str, Any] | None = None
    research: str | None = None  # the research's report (None: not researched yet)
    stopped: str | None = None
    production: ProductionLog | None = None
    deploy: DeployOutcome | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, state: object) -> object:
        # A checkpoint or a folded transcript may hold a key as null: it reads as not written yet.
        return (
            {key: value for key, value in state.items() if value is not None} if isinstance(state, Mapping) else state
        )

    @field_validator("failure", mode="before")
    @classmethod
    def _failure_as_told(cls, failure: object) -> object:
        # A state folded from a transcript, or told by a notice, may hold the failure without its log or diagnosis.
        if isinstance(failure, Mapping):
            return {key: "" for key in Failure.__annotations__} | dict(failure)
        return failure

    @field_validator("plan_at_start", mode="before")
    @classmethod
    def _not_replanned(cls, plan: object) -> object:
        return plan or None

    @property
    def sizes(self) -> Sizes:
        """The run's sizes, typed as they were recorded (a key the run lacks takes its default)."""
        return recorded_sizes(self.recorded_sizes)

    def ran(self, phase: str) -> bool:
        """The phase launched its jobs in this run."""
        return phase in self.jobs

    def artifact(self, name: str) -> str | None:
        """Where the run put the artifact on the host; None before the phase that makes it launched."""
        return self.artifacts.get(name)

    @property
    def ended_early(self) -> bool:
        """A job failed (and was not retried) or the run was stopped (rejected, aborted)."""
        return self.failure is not None or self.stopped is not None


def run_facts(state: Mapping[str, Any]) -> RunFacts:
    """The run's state read typed (a live state, a checkpoint's, or one folded from a transcript)."""
    return RunFacts.model_validate(state)
