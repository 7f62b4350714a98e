"""The typed result every check returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator

from eyas.tools.hosts.host import Host
from eyas.tools.recording.redact import Redactor

if TYPE_CHECKING:  # names in annotations only: the plan's records read Status here without the HTTP client
    from eyas.tools.hosts.http import HttpClient
    from eyas.tools.launch.api_key import ProductionKey
    from eyas.tools.settings.config import EyasConfig, HostConfig, TargetConfig


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


class CheckResult(BaseModel):
    """Redacted as it is made: findings quote unit files and command lines, and go to tables, JSON, the run's
    state and its report."""

    name: str
    status: Status
    message: str
    facts: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0

    @field_validator("message", "facts")
    @classmethod
    def _redacted(cls, value: Any) -> Any:
        return Redactor().value(value)


@dataclass
class CheckContext:
    """Everything a check may look at; checks read the world only through `host` and `http`."""

    host: Host
    host_config: HostConfig
    target: TargetConfig
    http: HttpClient
    data_path: str
    unit_file: str | None = None
    drafter_base: str | None = None  # pipeline.drafter_base: a hub id or a directory on the host
    binaries: list[str] = field(default_factory=lambda: ["nvidia-smi", "vllm", "torchrun", "huggingface-cli"])
    # Production's API key once read (tools/checks/service.production_headers): None until then.
    key: ProductionKey | None = field(default=None, repr=False)

    @property
    def hub_drafter(self) -> str | None:
        """drafter_base when it is a hub repo id, which the run downloads (a directory on the host starts with /)."""
        return self.drafter_base if self.drafter_base and not self.drafter_base.startswith("/") else None


def config_checks(
    config: EyasConfig, host: Host, http: HttpClient, host_name: str | None = None, unit_file: str | None = None
) -> CheckContext:
    """What the checks look at for a config, built in one place so that the pipeline's verify, `eyas verify` and the
    chat check the same things: the host's workdir as the data folder and, on the run's own host (where it lives),
    the drafter the run will finetune (pipeline.drafter_base)."""
    runs_here = (host_name or config.target.host) == config.target.host
    host_config = config.host(host_name)
    return CheckContext(
        host=host, host_config=host_config, target=config.target, http=http, data_path=host_config.workdir,
        unit_file=unit_file, drafter_base=config.pipeline.drafter_base if runs_here else None,
    )  # fmt: skip
