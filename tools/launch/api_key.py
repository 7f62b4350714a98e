"""The key production's vLLM wants on /v1/*, so that every request eyas makes to production carries it.

vLLM takes its key from `--api-key` (which wins) or from VLLM_API_KEY in its environment; eyas reads both where
production's unit sets them, on the host. The variable `target.api_key_env` names where eyas runs wins over both:
the operator said so. A key read from the unit is remembered as a secret, so every redactor made afterwards hides it
in any output, state or log; it reaches eyas's own jobs only by their owner-only secrets file (tools/jobs/detached.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from eyas.tools.launch.unit_file import UnitFile
from eyas.tools.recording.redact import remember_secrets
from eyas.tools.settings.config import TargetConfig, secret
from eyas.tools.workloads.vllm_server import API_KEY_ENV, flag_name

API_KEY_FLAG = "--api-key"
# The variable a job (generation) reads production's key from when the config names none: it arrives by secrets.env.
JOB_KEY_ENV = "EYAS_TARGET_API_KEY"


def unit_api_key(unit: UnitFile | None) -> str | None:
    """The key production's unit gives vLLM: its --api-key (the first of the keys it lists), else VLLM_API_KEY in its
    Environment=; None when it sets neither (EnvironmentFile= is not read: the service check says so)."""
    if unit is None:
        return None
    flags = unit.vllm.flags if unit.vllm is not None else {}
    given = [value for name, value in flags.items() if flag_name(name) == API_KEY_FLAG and isinstance(value, str)]
    key = given[-1] if given else unit.environment.get(API_KEY_ENV) or None
    if key:
        remember_secrets([key])
    return key


@dataclass(frozen=True)
class ProductionKey:
    """Production's key as eyas found it (None: it wants none), never shown (repr hides it)."""

    value: str | None

    def __repr__(self) -> str:
        return f"ProductionKey({'set' if self.value else 'none'})"

    @property
    def headers(self) -> dict[str, str] | None:
        """The Authorization header every request to production carries; None when it wants no key."""
        return {"Authorization": f"Bearer {self.value}"} if self.value else None


def configured_key(target: TargetConfig) -> str | None:
    """The key from the variable target.api_key_env names where eyas runs, if it is set."""
    return secret(target.api_key_env)


def production_key(target: TargetConfig, unit: UnitFile | None) -> ProductionKey:
    """The key to send production: the configured one, else the one its unit gives vLLM."""
    return ProductionKey(configured_key(target) or unit_api_key(unit))
