"""The typed result every check returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from eyas.tools.config import HostConfig, TargetConfig
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


class CheckResult(BaseModel):
    name: str
    status: Status
    message: str
    facts: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0


@dataclass
class CheckContext:
    """Everything a check may look at; checks read the world only through `host` and `http`."""

    host: Host
    host_config: HostConfig
    target: TargetConfig
    http: HttpClient
    data_path: str
    unit_file: str | None = None
    binaries: list[str] = field(default_factory=lambda: ["nvidia-smi", "vllm", "torchrun", "huggingface-cli"])
