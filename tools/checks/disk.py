"""Total and free bytes where the data will go (the nearest existing parent when it does not exist yet)."""

from __future__ import annotations

import shlex

from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.settings.units import format_size

LOW_FREE_BYTES = 10 * 1024**3


def check_disk(ctx: CheckContext) -> CheckResult:
    path = shlex.quote(ctx.data_path)
    command = f'p={path}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; echo "$p"; df -P -B1 "$p"'
    result = ctx.host.run(command, timeout=30)
    lines = result.stdout.strip().splitlines()
    if not result.ok or len(lines) < 3:
        detail = (result.stderr or result.stdout).strip()[:300]
        return CheckResult(name="disk", status=Status.FAIL, message=f"df failed at {ctx.data_path}: {detail}")
    fields = lines[-1].split()
    total, used, free = (int(value) for value in fields[1:4])
    facts = {
        "path": ctx.data_path,
        "measured_at": lines[0],
        "filesystem": fields[0],
        "mount": fields[-1],
        "total_bytes": total,
        "used_bytes": used,
        "free_bytes": free,
    }
    message = f"{format_size(free)} free of {format_size(total)} at {ctx.data_path} ({fields[-1]})"
    status = Status.WARN if free < LOW_FREE_BYTES else Status.OK
    return CheckResult(name="disk", status=status, message=message, facts=facts)
