"""How the target server was started, read from its real unit file: from systemd when it can be asked,
else from the configured path. Never from a guessed location."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlsplit

from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.errors import RemoteFileNotFound
from eyas.tools.launch.api_key import ProductionKey, configured_key, production_key
from eyas.tools.launch.unit_file import UnitFile, parse_unit_file
from eyas.tools.recording.redact import shown_env


def _from_systemd(ctx: CheckContext, unit: str) -> tuple[str, str] | None:
    """(fragment path, `systemctl cat` text) of a unit, or None when systemd cannot say."""
    if ctx.host.which("systemctl") is None:
        return None
    q = shlex.quote(unit)
    shown = ctx.host.run(f"systemctl show -p FragmentPath --value {q}", timeout=15)
    path = shown.stdout.strip()
    if not shown.ok or not path:
        return None
    text = ctx.host.run(f"systemctl cat --no-pager {q}", timeout=15)
    return (path, text.stdout) if text.ok else None


def read_unit(ctx: CheckContext) -> UnitFile | None:
    """The production unit as the service check reads it (systemd first, else the configured file); None when
    there is none to read or it does not parse, which the service check reports."""
    unit, unit_file = ctx.target.unit, ctx.unit_file or ctx.target.unit_file
    found = _from_systemd(ctx, unit) if unit and not ctx.unit_file else None
    try:
        text = found[1] if found else ctx.host.read_text(unit_file) if unit_file else None
        return parse_unit_file(text) if text is not None else None
    except (RemoteFileNotFound, ValueError):
        return None


def production_api_key(ctx: CheckContext) -> ProductionKey:
    """The key production wants: the configured one, else the one its unit gives vLLM. Read once per context, the
    unit only when the config names no key."""
    if ctx.key is None:
        ctx.key = production_key(ctx.target, None if configured_key(ctx.target) else read_unit(ctx))
    return ctx.key


def production_headers(ctx: CheckContext) -> dict[str, str] | None:
    """The Authorization header every request to production carries; None when it wants no key."""
    return production_api_key(ctx).headers


def check_service(ctx: CheckContext) -> CheckResult:
    unit, unit_file = ctx.target.unit, ctx.unit_file or ctx.target.unit_file
    facts: dict[str, Any] = {"unit": unit}
    found = _from_systemd(ctx, unit) if unit and not ctx.unit_file else None
    if found:
        facts["source"] = "systemd"
        facts["path"], text = found
    elif unit_file:
        facts["source"] = "file"
        facts["path"] = unit_file
        try:
            text = ctx.host.read_text(unit_file)
        except RemoteFileNotFound:
            return CheckResult(
                name="service",
                status=Status.FAIL,
                message=f"The unit file {unit_file} does not exist on {ctx.host.name}; fix target.unit_file or "
                "--unit-file.",
                facts=facts,
            )
    else:
        hint = f"systemd does not know '{unit}' there; " if unit else ""
        return CheckResult(
            name="service",
            status=Status.WARN,
            message=f"{hint}no unit file to read: set target.unit or target.unit_file (eyas does not guess paths).",
            facts=facts,
        )
    try:
        parsed = parse_unit_file(text)
    except ValueError as exc:
        return CheckResult(name="service", status=Status.FAIL, message=f"{facts['path']}: {exc}", facts=facts)
    return _judge(ctx, parsed, facts)


def _judge(ctx: CheckContext, parsed: UnitFile, facts: dict[str, Any]) -> CheckResult:
    facts.update(parsed.model_dump(exclude_none=True))
    facts["environment"] = shown_env(parsed.environment)  # verify --json, the transcript, the report
    vllm = parsed.vllm
    if vllm is None:
        return CheckResult(
            name="service",
            status=Status.WARN,
            message=f"{facts['path']} does not start vLLM: {shlex.join(parsed.exec_start)[:160]}",
            facts=facts,
        )
    mismatches = []
    url_port = urlsplit(ctx.target.base_url).port
    if vllm.port is not None and url_port is not None and vllm.port != url_port:
        mismatches.append(f"serves on port {vllm.port} but target.base_url uses {url_port}")
    served = vllm.served_model_name or vllm.model
    if served and served != ctx.target.model:
        mismatches.append(f"serves '{served}' but target.model is '{ctx.target.model}'")
    summary = f"vLLM serving {vllm.model} with tensor-parallel {vllm.tensor_parallel_size or 1}"
    if vllm.speculative_config:
        summary += f", speculative {vllm.speculative_config.get('method', '?')}"
    if mismatches:
        return CheckResult(
            name="service", status=Status.WARN, message=f"{summary}; " + "; ".join(mismatches), facts=facts
        )
    return CheckResult(name="service", status=Status.OK, message=f"{summary} ({facts['path']})", facts=facts)
