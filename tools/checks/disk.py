"""Total and free bytes of the volume that holds the data folder.

A folder that is not a folder, or not writable, fails. One that does not exist yet is measured on the volume eyas
would create it on (its nearest existing parent's), and the message says so; unless that parent is `/` itself:
`/data/eyas` missing on a host whose `/data` is not mounted, or `/dat/eyas` (a typo), would report the root volume,
and a plan sized for the big disk would fill the small one, so it fails and names the fix.
"""

from __future__ import annotations

import shlex

from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.settings.units import format_size

LOW_FREE_BYTES = 10 * 1024**3
# What the shell says of the folder before df runs: the word on its first line, and what it means.
UNUSABLE = {
    "absent": "does not exist",  # nor any folder above it but / (a typo, or a volume not mounted)
    "not-a-folder": "is not a folder",
    "read-only": "is not writable by the user eyas runs as",
}


def check_disk(ctx: CheckContext) -> CheckResult:
    path = shlex.quote(ctx.data_path)
    command = (
        f'p={path}; if [ ! -e "$p" ]; then echo absent; elif [ ! -d "$p" ]; then echo not-a-folder; '
        f'elif [ ! -w "$p" ]; then echo read-only; else echo usable; df -P -B1 "$p"; fi'
    )
    result = ctx.host.run(command, timeout=30)
    lines = result.stdout.strip().splitlines()
    if result.ok and lines and lines[0] == "absent":  # not there yet: the volume eyas would create it on
        parent = (
            f'p={path}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; '
            f'if [ "$p" = / ]; then echo absent; elif [ ! -w "$p" ]; then echo read-only; else echo "$p"; '
            'df -P -B1 "$p"; fi'
        )
        result = ctx.host.run(parent, timeout=30)
        lines = result.stdout.strip().splitlines()
    if result.ok and lines and lines[0] in UNUSABLE:
        return CheckResult(name="disk", status=Status.FAIL, message=unusable(ctx, UNUSABLE[lines[0]]))
    if not result.ok or len(lines) < 3:
        detail = (result.stderr or result.stdout).strip()[:300]
        return CheckResult(name="disk", status=Status.FAIL, message=f"df failed at {ctx.data_path}: {detail}")
    fields = lines[-1].split()
    total, used, free = (int(value) for value in fields[1:4])
    facts = {
        "path": ctx.data_path,
        "filesystem": fields[0],
        "mount": fields[-1],
        "total_bytes": total,
        "used_bytes": used,
        "free_bytes": free,
    }
    message = f"{format_size(free)} free of {format_size(total)} at {ctx.data_path} ({fields[-1]})"
    if lines[0] != "usable":
        facts["measured_at"] = lines[0]
        message += f"; it does not exist yet, and eyas creates it on that volume (the one of {lines[0]})"
    status = Status.WARN if free < LOW_FREE_BYTES else Status.OK
    return CheckResult(name="disk", status=status, message=message, facts=facts)


def unusable(ctx: CheckContext, problem: str) -> str:
    """One paragraph: the folder, what is wrong with it, and the two ways to fix it."""
    return (
        f"The data folder {ctx.data_path} {problem} on {ctx.host.name}, so its free space cannot be measured (a "
        f"parent folder may be another volume). Create it there (`mkdir -p {shlex.quote(ctx.data_path)}`, owned "
        "by the user eyas runs as), or point the host's workdir in the eyas config (or `--data-path`) at a "
        "writable folder on the volume the data should go to."
    )
