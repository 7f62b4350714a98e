"""Whether the target runs its own code: the production unit decides (`--trust-remote-code`), unless the config says.

Extraction, vocabulary and training load the same model directory the production server serves; a model that
needs `trust_remote_code` there needs it in every workload too, and one that the operator never trusted
must not start running its code because eyas loaded it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FLAG = "--trust-remote-code"


def unit_trusts_remote_code(vllm_flags: Mapping[str, Any]) -> bool:
    """True when the unit's vLLM command line passes --trust-remote-code (and does not take it back)."""
    if FLAG not in vllm_flags or "--no-trust-remote-code" in vllm_flags:
        return False
    return vllm_flags[FLAG] not in ("false", "False", "0")


def trust_remote_code(configured: bool | None, service_facts: Mapping[str, Any]) -> bool:
    """The run's choice: target.trust_remote_code when set, else what the service check read from the unit."""
    if configured is not None:
        return configured
    vllm = service_facts.get("vllm") or {}
    return unit_trusts_remote_code(vllm.get("flags") or {})
