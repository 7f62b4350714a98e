"""Which processes are the production server: its unit's main process and every descendant.

GPU memory is held by the engine workers, children of the process systemd started, so the whole tree counts.
With systemd the main process is the unit's MainPID. Where systemd is not PID 1 (containers, tests) the
unit runs under a stand-in that starts its ExecStart as a detached job; there the main process is the one
whose command line is exactly that ExecStart.
"""

from __future__ import annotations

import hashlib
import shlex

from pydantic import BaseModel

from eyas.tools.checks.result import CheckContext
from eyas.tools.launch.unit_file import UnitFile


class ProductionProcesses(BaseModel):
    main_pid: int
    source: str  # how the main pid was found, for the operator
    pids: list[int]  # main_pid and its descendants


def production_processes(ctx: CheckContext, unit: UnitFile | None) -> ProductionProcesses | None:
    """The production server's process tree on the host, or None when no running main process is found."""
    found = _systemd_main_pid(ctx) or (_exec_start_pid(ctx, unit.exec_start) if unit else None)
    if found is None:
        return None
    main_pid, source = found
    return ProductionProcesses(main_pid=main_pid, source=source, pids=_descendants(ctx, main_pid))


def _systemd_main_pid(ctx: CheckContext) -> tuple[int, str] | None:
    unit = ctx.target.unit
    if not unit or ctx.host.which("systemctl") is None:
        return None
    shown = ctx.host.run(f"systemctl show -p MainPID --value {shlex.quote(unit)}", timeout=15)
    text = shown.stdout.strip()
    if not shown.ok or not text.isdigit() or int(text) == 0:
        return None
    return int(text), f"systemd MainPID of {unit}"


def _exec_start_pid(ctx: CheckContext, argv: list[str]) -> tuple[int, str] | None:
    # /proc/PID/cmdline is the argv NUL-terminated. It is compared by its SHA-256: the argv carries production's
    # flags (an --api-key among them), and this script's own command line is visible to every user's `ps`.
    wanted = hashlib.sha256(b"".join(word.encode() + b"\0" for word in argv)).hexdigest()
    script = (
        "for d in /proc/[0-9]*; do "
        f'[ "$(sha256sum < $d/cmdline 2>/dev/null)" = {shlex.quote(wanted + "  -")} ] && echo "${{d#/proc/}}"; '
        "done; true"
    )
    pids = sorted(int(word) for word in ctx.host.run(script, timeout=30).stdout.split() if word.isdigit())
    if not pids:
        return None
    return pids[0], "stand-in (no systemd): the process running the unit's ExecStart"


def _descendants(ctx: CheckContext, root: int) -> list[int]:
    listing = ctx.host.run("ps -e -o pid=,ppid=", timeout=30).stdout
    children: dict[int, list[int]] = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(fields[0]))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return sorted(tree)
