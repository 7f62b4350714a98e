"""What a gate shows, typed: `GateView` for an approval gate (the phases' gates, built here by `gate_view`, and the
deploy gate, built by graph/gates/deploy.py with its `DeployChange`), `FailureView` for a failed job
(graph/gates/failure.py).

A view travels as plain JSON: the gate node returns `model_dump(mode="json")`, which the transcript records, the
interrupt carries and the checkpoint keeps; whoever shows or answers it (the terminal, the dashboard, `eyas
approve`, the chat) reads it back with `read_view`. Each part of a view dumps the keys it was made or read with and
no other (`Record`), so a view read back dumps to the very JSON it was read from and recorded runs replay.
"""

from __future__ import annotations

import shlex
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_serializer,
    model_serializer,
)

from eyas.graph.context import RunContext
from eyas.graph.gates.deploy_change import DeployChange
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.paths import paths_view
from eyas.graph.gates.production import generation_waits, production_estimate, production_view
from eyas.graph.phases.data.drafter import DrafterCheck
from eyas.graph.policy import PhaseEstimate, judge
from eyas.graph.run_facts import Check, run_facts
from eyas.graph.state import (
    APPROVAL_ACTIONS,
    Action,
    Record,
    RunState,
    run_plan,
    run_sizes,
)
from eyas.graph.window import GATE_OF, approved_with_window, opened_at, span, window_approval
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.jobs.resources import job_resources
from eyas.tools.planning.backend import BackendChoice
from eyas.tools.planning.downtime_window import DowntimeWindow
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode
from eyas.tools.planning.paths import PhasePath
from eyas.tools.planning.prompt_supply import PromptSupply
from eyas.tools.settings.config import ClusterConfig, JobResources
from eyas.tools.settings.sizes import SizeValue


class GateEstimate(PhaseEstimate):
    """The plan's figures for the phase, as `judge` weighs them, and (once the plan was made again from the
    generated data) the figures planned at the start beside them. No other key: a deploy gate's figures (named for
    the operator) are not read as an empty estimate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_phase_hours: float | None = None
    start_total_hours: float | None = None

    @model_serializer(mode="wrap")
    def _without_a_start(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Absent until the plan was made again, so a view recorded before these fields dumps as it was read.
        return {key: value for key, value in handler(self).items() if not key.startswith("start_") or value is not None}


Figure = bool | int | float | str | None  # one of a deploy gate's figures (graph/gates/deploy.py)


class Servers(Record):
    """The vLLM servers a phase starts (graph/phases/servers.py's launch_view): what they take of production's
    launch, and each one's argv. The deploy gate names production's argv before and after instead."""

    source: str | None = None
    inherited: list[str] = Field(default_factory=list)
    overridden: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    servers: dict[str, list[str]] = Field(default_factory=dict)


class ProductionEntry(Record):
    """What happens to production while one covered phase runs: the plan's ProductionImpact (keep, stop or reuse;
    the deploy gate's restart), the commands that stop and start it, and the servers the phase starts."""

    action: str | None = None
    downtime_hours: float | None = None
    gpus: list[int] = Field(default_factory=list)
    memory_bytes: int | None = None
    reason: str = ""
    commands: list[str] = Field(default_factory=list)
    servers: Servers | None = None


class ClusterView(Record):
    """Where the phase's jobs go on a Ray cluster and what each asks of it."""

    executor: Literal["ray"]
    ray_address: str
    resources: dict[str, JobResources]

    @field_serializer("resources")
    def _asked(self, resources: dict[str, JobResources]) -> dict[str, dict[str, Any]]:
        # An unset resource asks nothing, and is not shown.
        return {job_id: asks.model_dump(mode="json", exclude_none=True) for job_id, asks in resources.items()}


class ResearchSummary(Record):
    """The research's summary as a gate shows it (agents/research_report.py's short_summary)."""

    summary: str
    checks: list[str]
    path: str


class GatePolicy(Record):
    """The policy's verdict: an approval lets the run go on without asking."""

    approve: bool
    reasons: str


class WindowApproval(Record):
    """A gate inside a downtime window whose first gate approved the window: it passes with this decision."""

    gate: str  # the window's first gate, where it was approved
    who: str
    reason: str


class GateView(Record):
    """What the operator sees before a phase: estimates, verification, the exact commands on which host, what
    happens to production, where the jobs go, whether the phases' paths work here, where training's hidden states
    come from (the extraction and training gates), the prompt supply (the data gate: the source's prompts against
    those asked), the drafter to finetune from (the run's first gate: its format, its check against the target and
    the converted drafter training takes, or why it cannot be used), the downtime window this gate opens
    (graph/window.py) or the approval of the window it is in, and the policy's verdict."""

    kind: Literal["gate"]
    phase: str
    host: str
    choices: list[Action] = Field(default_factory=list, description="the answers it takes when not the usual ones")
    estimate: Annotated[GateEstimate | dict[str, Figure], Field(union_mode="left_to_right")]
    sizes: dict[str, SizeValue] = Field(default_factory=dict)
    verification: dict[str, Check] = Field(default_factory=dict)
    commands: list[str]
    production: dict[str, ProductionEntry] = Field(default_factory=dict)
    cluster: ClusterView | None = None
    extraction: BackendChoice | None = None
    extraction_mode: HiddenStatesMode | None = None
    paths: dict[str, PhasePath] = Field(default_factory=dict)
    prompt_supply: PromptSupply | None = None
    drafter: DrafterCheck | None = Field(None, description="the drafter to finetune, ready before the data gate")
    blocked: list[str] = Field(default_factory=list, description="why a covered phase cannot run here")
    blocked_later: list[str] = Field(default_factory=list, description="why a later phase cannot run here")
    research: ResearchSummary | None = None
    deploy: DeployChange | None = Field(None, description="the deploy gate's change (graph/gates/deploy.py)")
    window: DowntimeWindow | None = Field(None, description="the downtime window approved with this gate")
    window_approval: WindowApproval | None = None
    policy: GatePolicy | None = None

    def window_phases(self) -> list[str] | None:
        """The pipeline phases an approval of this gate keeps production down through, if it opens a window."""
        return span(self.window) if self.window is not None else None

    @property
    def actions(self) -> tuple[Action, ...]:
        """The answers the gate takes: those it names (the deploy gate has nothing to edit), else approve, edit and
        reject."""
        return tuple(self.choices) or APPROVAL_ACTIONS


_PENDING: TypeAdapter[GateView | FailureView] = TypeAdapter(
    Annotated[GateView | FailureView, Field(discriminator="kind")]
)


def read_view(value: object) -> GateView | FailureView:
    """A gate's view as the interrupt, the checkpoint or the transcript holds it (plain JSON), typed again."""
    return _PENDING.validate_python(value)


def cluster_view(cluster: ClusterConfig, specs: list[JobSpec]) -> ClusterView:
    """Where the phase's jobs go on the Ray cluster and what each asks of it."""
    return ClusterView(
        executor="ray",
        ray_address=str(cluster.ray_address),
        resources={spec.job_id: job_resources(cluster, spec.job_id) for spec in specs},
    )


def gate_view(phase: str, state: RunState, ctx: RunContext, specs: list[JobSpec]) -> GateView:
    """What the operator sees before a phase: estimates, verification, and the exact commands on which host,
    with the policy's verdict when the run has one."""
    plan = run_plan(state)
    planned = plan.phase(phase)
    production = production_view(phase, state, ctx)
    run = run_facts(state)
    start = run.plan_at_start
    estimate = GateEstimate(
        phase_hours=planned.phase_hours,
        disk_bytes=planned.disk_bytes,
        total_hours=plan.total_hours,
        needed_disk_bytes=plan.needed_bytes,
        fits=plan.fits,
        verdict=plan.verdict,
        **production_estimate(production),
        start_phase_hours=start.phase(phase).phase_hours if start else None,
        start_total_hours=start.total_hours if start else None,
    )
    verification = run.verification
    parts: dict[str, Any] = {}  # only the parts this gate has: the others stay out of its JSON
    if production:
        parts["production"] = production
    if ctx.config.cluster.executor == "ray":
        parts["cluster"] = cluster_view(ctx.config.cluster, specs)
    parts.update(paths_view(phase, state))
    # The data gate is the last before the prompts are split and answered: the supply is weighed there.
    supply = plan.prompt_supply if phase == "data" else None
    if supply is not None:
        parts["prompt_supply"] = supply
    parts.update(drafter_parts(phase, state, parts.get("blocked", [])))
    parts.update(window_parts(phase, state))
    view = GateView(
        kind="gate",
        phase=phase,
        host=ctx.host.name,
        estimate=estimate,
        sizes=run_sizes(state).model_dump(),
        verification=verification,
        commands=[shlex.join(spec.argv) for spec in specs],
        **parts,
    )
    if ctx.policy is None or view.window_approval is not None:
        return view
    verdict = judge(ctx.policy, phase, estimate, verification, supply)
    blocked = [f"cannot run here: {reason}" for reason in view.blocked]
    waits = generation_waits(phase, state)
    blocked += [waits] if waits else []
    refused = [
        f"the {gate} gate (in the window): {later.summary}"
        for gate in later_gates(view)
        if not (later := judge(ctx.policy, gate, later_estimate(state, gate), verification)).approve
    ]
    approve = verdict.approve and not blocked and not refused
    policy = GatePolicy(approve=approve, reasons="; ".join([*blocked, verdict.summary, *refused]))
    return view.model_copy(update={"policy": policy})


def drafter_parts(phase: str, state: RunState, blocked: list[str]) -> dict[str, Any]:
    """The drafter to finetune, at the run's first gate (the data gate; the extraction gate of a run that starts from
    existing data): one that cannot be used blocks it, so the run stops before generation."""
    run = run_facts(state)
    prepared = run.drafter
    from_existing_data = "conversations" in run.artifacts and not run.ran("data")
    if not prepared or phase != ("extract" if from_existing_data else "data"):
        return {}
    check = DrafterCheck.model_validate(prepared)
    refused = check.blocked()
    return {"drafter": check, **({"blocked": [*blocked, refused]} if refused else {})}


def window_parts(phase: str, state: RunState) -> dict[str, Any]:
    """The downtime window this gate opens (approving the gate approves it), or the earlier approval of the window
    this gate is in (the gate then passes without asking)."""
    window = opened_at(run_plan(state), phase)
    if window is not None:
        return {"window": window}
    approval = window_approval(state, phase)
    if approval is None:
        return {}
    reason = approved_with_window(approval)
    return {"window_approval": WindowApproval(gate=approval["gate"], who=approval["who"], reason=reason)}


def later_gates(view: GateView) -> list[str]:
    """The gates after this one that its window's approval answers."""
    gates = [GATE_OF[phase] for phase in view.window_phases() or []]
    return [gate for gate in dict.fromkeys(gates) if gate != view.phase]


def later_estimate(state: RunState, gate: str) -> GateEstimate:
    """A later gate's own figures, as the policy weighs them when the window's first gate approves it too (the
    production downtime is the window's, weighed at the first gate)."""
    planned = run_plan(state).phase(gate)
    return GateEstimate(phase_hours=planned.phase_hours, disk_bytes=planned.disk_bytes)
