"""A gate's view as titled sections of plain lines: the one reading of a GateView or a FailureView that the terminal
(cli/run_ui.py, with rich), the dashboard (dashboard/views.py, as escaped HTML) and the chat (chat_control.py, as
`gate_text`) all show, so that no face can leave out a part another shows. Lines are plain text: each face escapes
them its own way."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from eyas.agents.faces.progress_text import log_text
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.production import step_text
from eyas.graph.gates.view import ClusterView, GateEstimate, GateView, ProductionEntry
from eyas.tools.planning.gpu_budget import gpu_phrase
from eyas.tools.planning.prompt_supply import supply_verdict
from eyas.tools.settings.sizes import typed_size
from eyas.tools.settings.units import format_hours, format_size

LOG_TAIL_CHARS = 3000  # the end of a failed job's log every face shows (the job keeps the whole log)


@dataclass(frozen=True)
class Line:
    """One row: the terminal shows it as label and text, the dashboard as a table row (or, in a code section, the
    text alone)."""

    label: str  # what the line is about, the terminal's left column: a figure's name, a check, "will run"
    text: str
    alarm: bool = False  # the phase cannot go on as it is: a blocked path, the policy's stop, a failing check


@dataclass(frozen=True)
class Section:
    """One part of the view under its title (the dashboard's heading; the terminal's labels name it already)."""

    title: str
    lines: list[Line]
    code: bool = False  # commands and argvs, shown whole (never cut) in a fixed-width face
    log: bool = False  # a log's tail, its line breaks kept


def gate_title(view: GateView | FailureView) -> str:
    return f"failure in phase {view.phase}" if isinstance(view, FailureView) else f"gate: {view.phase}"


def gate_text(view: GateView | FailureView) -> str:
    """The view as plain text, its title first and then a line per row, for a face without tables (the chat)."""
    rows = [gate_title(view)]
    for part in gate_sections(view):
        between = "\n" if part.log else " "  # a log starts on its own line, as it was written
        rows += [f"{line.label}:{between}{line.text}" for line in part.lines]
    return "\n".join(rows)


def gate_sections(view: GateView | FailureView) -> list[Section]:
    """Every part the view has, in the order the operator reads it; a part this gate lacks is left out."""
    if isinstance(view, FailureView):
        return _failure_sections(view)
    sizes = ", ".join(f"{key}={typed_size(value)}" for key, value in view.sizes.items())
    checks = [
        Line(f"verify {name}", f"{check.status}: {check.message}", alarm=check.status == "fail")
        if name != "drafter" or view.drafter is None or view.drafter.error is None
        else _verified_then_refused(check.status, check.message)
        for name, check in view.verification.items()
    ]
    policy = view.policy
    sections = [
        Section("Plan", [Line("phase", view.phase), Line("host", view.host), *_figures(view)]),
        Section("Prompts", _prompts(view)),
        Section("Sizes", [Line("sizes", sizes)] if sizes else []),
        Section("Verification", checks),
        Section("Drafter", _drafter(view)),
        Section("Exact commands", [Line("will run", command) for command in view.commands], code=True),
        Section("Ray cluster", [Line("ray", line) for line in cluster_lines(view.cluster)]),
        Section("Downtime window", _window(view)),
        Section("Production", [Line("production", line) for line in production_lines(view.production)], code=True),
        Section(
            "Paths and research", [Line(label, text, alarm=label == "BLOCKED") for label, text in paths_lines(view)]
        ),
        Section("Deploy", _deploy(view)),
        Section("Policy", [Line("policy stop", policy.reasons, alarm=True)] if policy and not policy.approve else []),
    ]
    return [section for section in sections if section.lines]


def _failure_sections(view: FailureView) -> list[Section]:
    """The failed job, its status and the first diagnosis (graph/supervise.py's), then the end of its log."""
    failed = [Line("job", view.job_id), Line("status", view.status, alarm=True), Line("diagnosis", view.diagnosis)]
    tail = log_text(view.log_tail[-LOG_TAIL_CHARS:])
    return [Section("Failure", failed), *([Section("Log tail", [Line("log", tail)], log=True)] if tail else [])]


# The plan's figures as an operator reads them: a name in words and a unit (the state keeps the raw numbers).
_FIGURE_NAMES = {
    "phase_hours": "this phase",
    "total_hours": "whole run",
    "start_phase_hours": "this phase, planned at the start",
    "start_total_hours": "whole run, planned at the start",
    "disk_bytes": "disk for this phase",
    "needed_disk_bytes": "disk for the run",
    "fits": "fits the disk",
    "verdict": "verdict",
    "production_action": "production",
    "downtime_hours": "production down",
}


def _figure_text(name: str, value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if name.endswith("_hours") and isinstance(value, int | float):
        return format_hours(value)
    if name.endswith("_bytes") and isinstance(value, int | float):
        return format_size(value)
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _figures(view: GateView) -> list[Line]:
    """The plan's figures for the phase in words and units (the deploy gate's own, already named for the operator,
    as they are); an unknown one is left out."""
    if isinstance(view.estimate, GateEstimate):
        figures = view.estimate.model_dump()
        return [
            Line(_FIGURE_NAMES.get(name, name), _figure_text(name, value))
            for name, value in figures.items()
            if value is not None
        ]
    return [
        Line(name, f"{value:.3g}" if isinstance(value, float) else str(value))
        for name, value in view.estimate.items()
        if value is not None
    ]


def _prompts(view: GateView) -> list[Line]:
    """The prompts the source holds against those asked (the data gate), in red when it holds too few."""
    supply = view.prompt_supply
    if supply is None:
        return []
    short = supply.enough is False
    return [Line("TOO FEW PROMPTS" if short else "prompts", supply_verdict(supply), alarm=short)]


def _verified_then_refused(status: str, message: str) -> Line:
    """Verify's drafter row where the drafter's preparation refused it since: verify read the two config.json files
    (or, for a hub id, nothing yet); download.py checked the drafter itself, and its refusal is the one that holds."""
    said = f"{status} at verify ({message}), which read only the config.json files; refused since by its preparation"
    return Line("verify drafter", f"{said} (drafter refused, below)", alarm=True)


def _drafter(view: GateView) -> list[Line]:
    """The drafter to finetune: its format, its check against the target, what training takes, or why it cannot."""
    rows = view.drafter.lines() if view.drafter is not None else []
    return [Line(label, text, alarm=label == "drafter refused") for label, text in rows]


def _window(view: GateView) -> list[Line]:
    """The downtime window an approval of this gate approves, or the earlier approval that answers this gate."""
    if view.window is not None:
        return [Line("downtime window", f"{view.window.line()}; approving this gate approves every phase in it")]
    approved = view.window_approval
    return [Line("approved", approved.reason)] if approved is not None else []


def _deploy(view: GateView) -> list[Line]:
    """Why a deploy cannot be made, when it cannot (its commands are then none)."""
    error = view.deploy.error if view.deploy is not None else None
    return [Line("cannot deploy", error, alarm=True)] if error else []


def cluster_lines(cluster: ClusterView | None) -> list[str]:
    """Where the jobs go on the Ray cluster, and per job what it asks of Ray."""
    if cluster is None:
        return []
    lines = [f"jobs go to the Ray cluster at {cluster.ray_address}"]
    for job_id, resources in cluster.resources.items():
        asks = resources.model_dump(exclude_none=True)
        wanted = ", ".join(f"{name}={value}" for name, value in asks.items() if value not in ({}, None))
        lines.append(f"{job_id}: {wanted or 'asks nothing (runs on the head node)'}")
    return lines


def production_lines(production: dict[str, ProductionEntry]) -> list[str]:
    """Per covered phase what happens to production and for how long, the commands that stop and start it, what
    eyas's servers inherit, and each server's argv."""
    lines = []
    for phase, entry in production.items():
        action, hours = entry.action or "not planned", entry.downtime_hours
        downtime = (
            ""
            if action not in ("stop", "restart")
            else f", down for {hours:.2f} h"
            if hours is not None
            else ", downtime unknown"
        )
        lines.append(f"{phase}: {action}{downtime}; {gpu_phrase(entry.gpus)}: {entry.reason}")
        lines += [f"{phase}: {step_text(phase, step)}" for step in entry.commands]
        servers = entry.servers
        if servers is None:
            continue
        kept = {"inherited": servers.inherited, "overridden": servers.overridden, "dropped": servers.dropped}
        for key, names in kept.items():
            if names:
                lines.append(f"{phase} servers {key}: {', '.join(names)}")
        lines += [f"{phase} server {name}: {shlex.join(argv)}" for name, argv in servers.servers.items()]
    return lines


def paths_lines(view: GateView) -> list[tuple[str, str]]:
    """The extraction backend and why, where training's hidden states come from (the mode, its rule, bound and
    hours), each covered phase's path with the compat rows it needs, what blocks it (now or later), and the
    research: as (label, text) rows."""
    rows: list[tuple[str, str]] = []
    if view.extraction is not None:
        rows.append(("extraction backend", view.extraction.reason))
    if view.extraction_mode is not None:
        rows += view.extraction_mode.lines()
    for phase, path in view.paths.items():
        needs = [
            f"{'yes' if row.works else 'NO' if row.works is False else '?'}: {row.needs} (from {row.minimum})"
            for row in path.rows
        ]
        needs += [f"NO: the host's vLLM --help lacks {flag}" for flag in path.missing_flags]
        rows.append((f"{phase} path", f"{path.path}: " + ("; ".join(needs) or "nothing known to check")))
    rows += [("BLOCKED", reason) for reason in view.blocked]
    rows += [("blocked later", reason) for reason in view.blocked_later]
    research = view.research
    if research is not None:
        rows.append(("research", research.summary or "(no synthesis)"))
        rows += [("research claim", line) for line in research.checks]
        if research.path:
            rows.append(("research report", research.path))
    return rows
