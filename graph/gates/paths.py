"""What a gate shows about whether its phases can run here, and what the research said, where the operator decides.

From the plan: the extraction backend and why (at the extraction gate), and for each phase the gate asks about,
the path it takes, the compat rows that path needs with their minimum versions, and what blocks it. A blocked
phase is never launched: the policy does not approve it, and an approval ends the run instead of launching.
"""

from __future__ import annotations

from typing import Any

from eyas.graph.gates.production import GATE_PHASES
from eyas.graph.state import RunState


def paths_view(phase: str, state: RunState) -> dict[str, Any]:
    """The gate's entries: "extraction", "paths" (per covered phase), "blocked" (their reasons), "blocked_later"
    (a later phase's: said before this phase spends hours on data it would feed), "research"."""
    plan = state.get("plan", {})
    view: dict[str, Any] = {}
    if phase == "extract" and plan.get("extraction"):
        view["extraction"] = plan["extraction"]
    planned = plan.get("paths") or {}
    names = GATE_PHASES.get(phase, (phase,))
    covered = {name: planned[name] for name in names if name in planned}
    if covered:
        view["paths"] = covered
        blocked = [path["blocked"] for path in covered.values() if path.get("blocked")]
        if blocked:
            view["blocked"] = blocked
    later = [path["blocked"] for name, path in planned.items() if name not in names and path.get("blocked")]
    if later:
        view["blocked_later"] = later
    research = state.get("research_summary")
    if research:
        view["research"] = research
    return view


def blocked_stop(phase: str, blocked: list[str]) -> str:
    """Why the run ended when a blocked phase was approved."""
    return f"the {phase} phase was approved but cannot run on this host, so nothing was launched: {'; '.join(blocked)}"


def paths_lines(view: dict[str, Any]) -> list[tuple[str, str]]:
    """The section as (label, text) rows, the same in the terminal and the dashboard."""
    rows: list[tuple[str, str]] = []
    extraction = view.get("extraction")
    if extraction:
        rows.append(("extraction backend", extraction["reason"]))
    for phase, path in (view.get("paths") or {}).items():
        needs = [
            f"{'yes' if row['works'] else 'NO' if row['works'] is False else '?'}: {row['needs']} "
            f"(from {row['minimum']})"
            for row in path.get("rows", [])
        ]
        needs += [f"NO: the host's vLLM --help lacks {flag}" for flag in path.get("missing_flags", [])]
        rows.append((f"{phase} path", f"{path['path']}: " + ("; ".join(needs) or "nothing known to check")))
    rows += [("BLOCKED", reason) for reason in view.get("blocked", [])]
    rows += [("blocked later", reason) for reason in view.get("blocked_later", [])]
    research = view.get("research")
    if research:
        rows.append(("research", research.get("summary") or "(no synthesis)"))
        rows += [("research claim", line) for line in research.get("checks", [])]
        if research.get("path"):
            rows.append(("research report", research["path"]))
    return rows
