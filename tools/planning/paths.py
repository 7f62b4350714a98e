"""Will each phase's chosen path work on this host? The plan's answer, from what verify found.

Verify judges every path the pipeline might take (the compat table, the flags of eyas's own servers); the plan
knows which one each phase takes (the extraction backend it chose, CUDA or CPU training), so it narrows both to
those paths. A phase whose path cannot work carries `blocked`, with the minimum versions, and is never launched:
its gate says so and refuses to launch it (graph/gates/gate.py). The model itself can block a path too: the hf
backend asked for a quantized checkpoint (BackendChoice.refused), which `with_backend` adds to the extract phase's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from eyas.tools.checks.compat import Row
from eyas.tools.planning.backend import BackendChoice

PACKAGES = ("vllm", "speculators", "transformers", "torch")


class PhasePath(BaseModel):
    """plan["paths"][phase]: the path the phase takes, the compat rows and server flags it needs, and why it
    cannot work (None when it can, or when nothing says it cannot)."""

    path: str
    rows: list[Row]
    missing_flags: list[str]
    blocked: str | None


ONLINE = ("extract", "vllm")  # the compat rows an online train phase's extraction server needs
ONLINE_PATH = "online vllm"  # how the train phase names that path


def chosen(backend: str, cuda: bool, online: bool = False) -> dict[str, tuple[set[str], str | None]]:
    """Per phase: the compat table's paths it takes, and the server (of tools/checks/server_flags.py) it starts. An
    online (or hybrid) train phase takes the vllm extraction path too ("online vllm": its extraction server)."""
    train = {"cpu loop / speculators", "cuda"} if cuda else {"cpu loop / speculators"}
    if online:
        train.add(ONLINE_PATH)
    return {
        "extract": ({backend}, "extraction" if backend == "vllm" else None),
        "train": (train, "extraction" if online else None),
        "evaluate": ({"vllm"}, "evaluation"),
        "deploy": ({"production"}, None),  # production restarted with --speculative-config method eagle3
    }


def _taken(row: Row, phase: str, taken: set[str]) -> bool:
    if row.phase == phase and row.path in taken:
        return True
    return ONLINE_PATH in taken and (row.phase, row.path) == ONLINE


def reason(row: Row) -> str:
    """Why a row's path cannot work: what it needs, and from which version or what the probe found instead."""
    if not row.fix:
        return f"it needs {row.needs}, from {row.minimum}"
    if row.detail.startswith("no: "):
        return f"it needs {row.needs}, which this host's vLLM lacks ({row.detail[4:]})"
    return f"it needs {row.needs}, which this host's vLLM could not be asked ({row.detail})"


def phase_paths(
    compat: dict[str, Any], flags: dict[str, Any], backend: str, cuda: bool, online: bool = False
) -> dict[str, PhasePath]:
    """`compat` and `flags` are the facts of verify's compat and server_flags checks (empty when not known);
    `online`: the train phase starts an extraction server (hidden states fetched online)."""
    rows = [Row.model_validate(row) for row in compat.get("table", [])]
    versions = compat.get("versions") or {}
    installed = ", ".join(f"{name} {versions.get(name) or 'not installed'}" for name in PACKAGES if name in versions)
    servers = flags.get("servers") or {}
    paths = {}
    for phase, (taken, server) in chosen(backend, cuda, online).items():
        needed = [row for row in rows if _taken(row, phase, taken)]
        missing = list((servers.get(server) or {}).get("missing", [])) if server else []
        reasons = [reason(row) for row in needed if row.works is False]
        if missing:
            reasons.append(f"its {server} server passes {', '.join(missing)}, which the host's vLLM --help lacks")
        where = f" (installed: {installed})" if installed else ""
        blocked = f"{phase} ({' + '.join(sorted(taken))}) cannot work on this host: {'; '.join(reasons)}{where}"
        fixes = dict.fromkeys(row.fix for row in needed if row.fix and row.detail.startswith("no: "))
        if fixes:
            blocked += ". " + " ".join(fixes)
        paths[phase] = PhasePath(
            path=" + ".join(sorted(taken)), rows=needed, missing_flags=missing, blocked=blocked if reasons else None
        )
    return paths


def with_backend(paths: dict[str, PhasePath], extraction: BackendChoice | None) -> dict[str, PhasePath]:
    """The plan's paths with the extract phase blocked where the backend the run asks for cannot extract from the
    model (BackendChoice.refused): the paths are judged from the host's packages, the refusal from the model's
    config.json. What every reader of a plan's paths takes (the gates, the dry run)."""
    if extraction is None or extraction.refused is None:
        return paths
    extract = paths.get("extract") or PhasePath(path=extraction.backend, rows=[], missing_flags=[], blocked=None)
    blocked = "; ".join(reason for reason in (extract.blocked, extraction.refused) if reason)
    return {**paths, "extract": extract.model_copy(update={"blocked": blocked})}
