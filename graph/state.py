"""The run's state: small JSON values only (artifacts by path, never data), so checkpoints stay small.

What enters from outside (sizes, answers to gates) is checked by a pydantic model where it crosses in, and
the state keeps its plain JSON dump: `Sizes.model_dump()`, read back with `run_sizes(state)`. The records the graph
makes itself are typed the same way: the plan (`RunPlan`, read back with `run_plan(state)`), the gate views
(graph/gates/view.py); each is a `Record`, whose dump is the JSON it was made or read with, key for key.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
)
from typing_extensions import TypedDict  # pydantic (and so LangGraph Studio) needs it on Python < 3.12

from eyas.tools.planning.backend import BackendChoice
from eyas.tools.planning.downtime_window import DowntimeWindow, downtime_windows
from eyas.tools.planning.estimate import Alternative
from eyas.tools.planning.gpu_budget import GPU_PHASES, ProductionImpact
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode
from eyas.tools.planning.paths import PhasePath
from eyas.tools.planning.prompt_supply import PromptSupply
from eyas.tools.recording.redact import Redactor
from eyas.tools.settings.sizes import DEFAULT_SIZES, Sizes, SizeValue, recorded_sizes

ApprovalAction = Literal["approve", "reject", "edit"]
FailureAction = Literal["retry", "abort"]
Action = Literal[ApprovalAction, FailureAction]
APPROVAL_ACTIONS: tuple[ApprovalAction, ...] = get_args(ApprovalAction)
FAILURE_ACTIONS: tuple[FailureAction, ...] = get_args(FailureAction)


class Record(BaseModel):
    """A record the graph keeps in its state or shows: it dumps the keys it was made (or read) with, and no other,
    whatever their defaults. A key left out stays out; a key set to None (an unknown downtime) stays, as null. So a
    record read back from a checkpoint or a transcript dumps to the very JSON it was read from, and replays match."""

    model_config = ConfigDict(frozen=True)

    @model_serializer(mode="wrap")
    def _as_made(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if key in self.model_fields_set}


class PhasePlan(Record):
    """One phase in the plan: its hours and bytes, and what happens to production meanwhile (GPU phases)."""

    phase_hours: float | None = None
    disk_bytes: int | None = None
    production: ProductionImpact | None = None


class LoadTime(Record):
    """How long production takes to load, and where the figure comes from."""

    load_s: float
    source: str


class RunPlan(Record):
    """The plan (graph/phases/plan/node.py): hours and bytes per phase, the verdict against the verified free disk
    with the ways out, the prompts the source holds against those asked, the extraction backend and each phase's
    path, where training's hidden states come from (offline, hybrid or online), and production's load time. A run
    that has not planned yet reads as the empty plan, every figure unknown; a plan recorded before a figure existed
    (the prompt supply, the hidden states' mode) reads without it."""

    extraction: BackendChoice | None = None
    extraction_mode: HiddenStatesMode | None = None
    paths: dict[str, PhasePath] = Field(default_factory=dict)
    fits: bool | None = None
    verdict: str | None = None
    needed_bytes: int | None = None
    free_disk_bytes: int | None = None
    total_hours: float | None = None
    sources: dict[str, str] = Field(default_factory=dict)  # figure -> where it came from
    alternatives: list[Alternative] = Field(default_factory=list)
    phases: dict[str, PhasePlan] = Field(default_factory=dict)
    production_load: LoadTime | None = None
    captured_layers: list[int] = Field(default_factory=list)
    prompt_supply: PromptSupply | None = None

    @field_serializer("alternatives")
    def _alternatives(self, alternatives: list[Alternative]) -> list[dict[str, Any]]:
        return [alternative.model_dump(exclude_none=True) for alternative in alternatives]

    def phase(self, name: str) -> PhasePlan:
        """The phase's entry; one the plan does not cover has every figure unknown."""
        return self.phases.get(name) or PhasePlan()

    def production(self, phase: str) -> ProductionImpact | None:
        """What the plan says happens to production during `phase` (None: nothing planned)."""
        return self.phase(phase).production

    def downtime_windows(self) -> list[DowntimeWindow]:
        """The GPU phases that stop production back to back, each group stopped once and started once."""
        load = self.production_load.load_s if self.production_load is not None else None
        return downtime_windows({phase: self.production(phase) for phase in GPU_PHASES}, load)


class Failure(TypedDict):
    phase: str
    job_id: str
    status: str
    log_tail: str
    diagnosis: str


class Decision(TypedDict):
    gate: str
    action: Action
    reason: str
    who: str  # operator | policy | cli | operator (chat)
    window: NotRequired[list[str]]  # an approval that approved a downtime window: its phases (graph/window.py)


DeployStatus = Literal["kept", "rolled_back", "rejected", "skipped", "failed"]


class DeployOutcome(Record):
    """The deploy phase's end: what production runs now, and what its own counters measured with the method deployed.
    The state keeps its JSON dump; `RunFacts.deploy` reads it back typed."""

    status: DeployStatus  # kept | rolled_back (production said no) | rejected (gate) | skipped (policy) | failed
    reason: str
    drafter: str | None = None
    mean_acceptance_length: float | None = None  # from production's /metrics over the probe requests
    acceptance_rate: float | None = None
    tokens_per_s_before: float | None = None
    tokens_per_s_after: float | None = None
    downtime_s: float | None = None  # restarts until healthy (the rollback's too)
    argv_before: list[str] = Field(default_factory=list)
    argv_after: list[str] = Field(default_factory=list)  # what production runs now

    @property
    def restarted(self) -> bool:
        """Production restarted with the method (kept, or rolled back after its counters said no)."""
        return self.status in ("kept", "rolled_back")


class GateAnswer(BaseModel):
    """An answer to a gate, from this terminal, `eyas approve`, the chat or a replayed transcript."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action
    reason: str = ""
    who: str = "operator"
    sizes: dict[str, SizeValue] | None = Field(
        None, description="an edit's sizes: those it names change, the rest stay"
    )

    @field_validator("sizes")
    @classmethod
    def _known_and_in_bounds(cls, sizes: dict[str, SizeValue] | None) -> dict[str, SizeValue] | None:
        # Checked when the answer is made, wherever it comes from, before it is recorded: an out-of-range size
        # recorded as a gate's one answer would fail every resume after it. max_tokens and max_seq_len are checked
        # against each other here when the edit names both (the terminal and the dashboard send every size); an edit
        # that names one is checked against the run's other where the run is known (record_gate_answer, the gate).
        if sizes:
            edited = {**DEFAULT_SIZES.model_dump(), **sizes}
            if {"max_tokens", "max_seq_len"} <= sizes.keys():
                Sizes.model_validate(edited)
            else:
                recorded_sizes(edited)
        return sizes

    @field_validator("reason")
    @classmethod
    def _redacted(cls, reason: str) -> str:
        # A reason is free text that goes to answers.jsonl, the checkpoints and the report.
        return Redactor().text(reason)

    def decision(self, gate: str) -> Decision:
        return Decision(gate=gate, action=self.action, reason=self.reason, who=self.who)


class RunState(TypedDict, total=False):
    run_id: str
    eyas: dict[str, str | None]  # which eyas started the run (run.json's): version and git commit
    phase: str
    sizes: dict[str, SizeValue]  # Sizes.model_dump()
    verification: dict[str, dict[str, str]]  # check -> {status, message}
    free_disk_bytes: int
    gpus: dict[str, Any]  # graph/phases/verify.gpu_summary: each GPU's memory and whether production holds it
    trust_remote_code: bool  # the target runs its own code (the unit's --trust-remote-code or the config's)
    compat: dict[str, Any]  # verify's compat facts: installed versions and the table of paths
    server_flags: dict[str, Any]  # verify's server_flags facts: per server of eyas, the flags the host's vLLM lacks
    research_summary: dict[str, Any]  # the research's summary and its unchecked claims, for the gates
    plan: dict[str, Any]  # RunPlan.model_dump(mode="json"), read back with run_plan(state)
    plan_at_start: dict[str, Any]  # the first plan, once the plan was made again from the generated data
    measured: dict[str, Any]  # what the first plan was made from (Measured), to make it again (phases/plan/replan.py)
    jobs: dict[str, list[str]]  # phase -> job ids (the job registry)
    artifacts: dict[str, str]  # name -> path on the host
    decisions: Annotated[list[Decision], operator.add]
    failure: Failure | None
    drafter: dict[str, Any]  # the drafter to finetune, made ready before the data gate (phases/data/drafter.py)
    prompts: dict[str, Any]  # the prompt split's summary: source, training and held-out counts
    training: dict[str, list[dict[str, Any]]]  # the drafter's curves: {"train": rows, "val": rows}
    online: dict[str, Any]  # train.py's online_summary.json (online or hybrid runs): per epoch, fetched and bytes
    drafter_files: list[dict[str, Any]]  # the trained drafter's files on the host: name and bytes
    evaluation: dict[str, Any]
    research: str | None
    report: str
    stopped: str | None  # why the run ended early (rejected, aborted)
    production: dict[str, Any]  # graph/downtime.py's summary: stopped now?, each stop's downtime
    deploy: dict[str, Any]  # DeployOutcome.model_dump(mode="json"), read back with run_facts(state).deploy


def run_sizes(state: RunState) -> Sizes:
    """The run's sizes, as they were recorded (`recorded_sizes`, as `RunFacts.sizes` reads them); a key the state
    lacks, or holds as null, takes its default from `Sizes`."""
    return recorded_sizes(state.get("sizes") or {})


def run_plan(state: Mapping[str, Any]) -> RunPlan:
    """The run's plan, typed (from a live state or one read back from a checkpoint); before the plan node ran, the
    empty plan."""
    return RunPlan.model_validate(state.get("plan") or {})
