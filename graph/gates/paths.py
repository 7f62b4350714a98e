"""What a gate shows about whether its phases can run here, and what the research said, where the operator decides.

From the plan: the extraction backend and why (at the extraction gate), where training's hidden states come from
(offline, hybrid or online: at the extraction and training gates), and for each phase the gate asks about,
the path it takes, the compat rows that path needs with their minimum versions, and what blocks it (an hf backend
asked for a quantized checkpoint included: tools/planning/paths.py's with_backend). A blocked phase is never
launched: the policy does not approve it, and an approval ends the run instead of launching.
"""

from __future__ import annotations

from typing import Any

from eyas.graph.gates.production import GATE_PHASES
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_plan
from eyas.tools.planning.paths import with_backend


def paths_view(phase: str, state: RunState) -> dict[str, Any]:
    """The gate's entries, GateView's fields of the same names: "extraction", "extraction_mode", "paths" (per
    covered phase), "blocked" (their reasons), "blocked_later" (a later phase's: said before this phase spends
    hours on data it would feed), "research". Only those the gate has: the others stay out of its view."""
    plan = run_plan(state)
    view: dict[str, Any] = {}
    if phase == "extract" and plan.extraction is not None:
        view["extraction"] = plan.extraction
    if phase in ("extract", "train") and plan.extraction_mode is not None:
        view["extraction_mode"] = plan.extraction_mode
    names = GATE_PHASES.get(phase, (phase,))
    paths = with_backend(plan.paths, plan.extraction)
    covered = {name: paths[name] for name in names if name in paths}
    if covered:
        view["paths"] = covered
        blocked = [path.blocked for path in covered.values() if path.blocked]
        if blocked:
            view["blocked"] = blocked
    later = [path.blocked for name, path in paths.items() if name not in names and path.blocked]
    if later:
        view["blocked_later"] = later
    research = run_facts(state).research_summary
    if research:
        view["research"] = research
    return view


def blocked_stop(phase: str, blocked: list[str]) -> str:
    """Why the run ended when a blocked phase was approved."""
    return f"the {phase} phase was approved but cannot run on this host, so nothing was launched: {'; '.join(blocked)}"
