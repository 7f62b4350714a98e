"""The PATH trap: what a non-interactive shell (the one a detached job gets) finds, versus the ML venv."""

from __future__ import annotations

import posixpath
import shlex

from eyas.tools.checks.result import CheckContext, CheckResult, Status


def check_binaries(ctx: CheckContext) -> CheckResult:
    python = ctx.host_config.python
    venv_bin = posixpath.dirname(python)
    script = "; ".join(
        f"printf '%s\\t%s\\t%s\\n' {shlex.quote(tool)} \"$(command -v {shlex.quote(tool)})\" "
        f'"$([ -x {shlex.quote(posixpath.join(venv_bin, tool))} ] && echo yes)"'
        for tool in ctx.binaries
    )
    interpreter = ctx.host.run(f"[ -x {shlex.quote(python)} ] && echo yes; {script}", timeout=30)
    lines = interpreter.stdout.splitlines()
    if not lines or lines[0] != "yes":
        return CheckResult(
            name="binaries",
            status=Status.FAIL,
            message=f"The ML interpreter {python} does not exist or is not executable; fix hosts.*.python.",
            facts={"python": python},
        )
    tools: dict[str, dict[str, str | None]] = {}
    trapped = []
    for line in lines[1:]:
        tool, on_path, in_venv = [*line.split("\t"), "", ""][:3]
        venv_path = posixpath.join(venv_bin, tool) if in_venv == "yes" else None
        tools[tool] = {"on_path": on_path or None, "in_venv": venv_path}
        if venv_path and not on_path:
            trapped.append(tool)
    facts = {"python": python, "venv_bin": venv_bin, "tools": tools, "only_in_venv": trapped}
    missing = [tool for tool, where in tools.items() if not where["on_path"] and not where["in_venv"]]
    if trapped:
        return CheckResult(
            name="binaries",
            status=Status.WARN,
            message=f"only in the venv, not on PATH: {', '.join(trapped)} (jobs use {venv_bin}/... by absolute path)",
            facts=facts,
        )
    found = [tool for tool in tools if tool not in missing]
    if not found:
        message = f"none of {', '.join(missing)} is on PATH or in the venv"
    else:
        message = f"found: {', '.join(found)}" + (f"; absent: {', '.join(missing)}" if missing else "")
    return CheckResult(name="binaries", status=Status.OK, message=message, facts=facts)
