"""Policies for unattended runs: approve a gate only when the phase fits its budgets, else stop and notify."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eyas.tools.config import format_validation_error
from eyas.tools.errors import ConfigError


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_phase_hours: float | None = Field(None, gt=0, description="longest estimated phase approved unattended")
    max_total_hours: float | None = Field(None, gt=0, description="longest estimated whole run approved unattended")
    max_disk_bytes: int | None = Field(None, gt=0, description="most bytes a run may write on the host")
    allow_warnings: bool = Field(True, description="approve when verification has warnings (but no failures)")
    allow_production_stop: bool = Field(
        False, description="approve a phase that must stop the production server (its GPUs are needed)"
    )
    max_production_downtime_hours: float | None = Field(
        None, gt=0, description="longest production downtime (phase hours + load time) approved unattended"
    )
    # Deploy (eyas deploy, the demo's last step): the drafter stays in production only at these or better.
    deploy_min_acceptance_length: float = Field(
        1.2, ge=1.0, description="mean acceptance length production's own counters must show to keep the drafter"
    )
    deploy_min_speedup: float | None = Field(
        None, gt=0, description="tokens/s with the drafter over tokens/s before it, to keep the drafter"
    )
    deploy_probe_requests: int = Field(8, gt=0, description="probe requests per deploy measurement window")
    notify_command: str | None = Field(
        None, description="run locally when a gate stops; the message is on stdin and in $EYAS_MESSAGE"
    )
    # A host that stops answering while jobs run there (an SSH outage): the monitor keeps trying, waiting twice as
    # long after each failure, up to host_retry_max_s, and gives up (the driver stops with a message) after this.
    host_outage_hours: float = Field(
        12.0, gt=0, description="how long the monitor waits for an unreachable host (its jobs keep running there)"
    )
    host_retry_max_s: float = Field(
        300.0, gt=0, description="longest wait between tries to reach an unreachable host (the waits double up to it)"
    )


class PhaseEstimate(BaseModel):
    """The planner's view of one phase as a gate weighs it; None where the plan has no figure."""

    model_config = ConfigDict(frozen=True)

    phase_hours: float | None = None
    disk_bytes: int | None = None
    total_hours: float | None = None
    needed_disk_bytes: int | None = None
    fits: bool | None = None
    verdict: str | None = None
    production_action: str | None = None  # keep | stop | reuse, for the phases the gate asks about
    downtime_hours: float | None = None  # production's expected downtime when the action is stop


class Verdict(BaseModel):
    approve: bool
    reasons: list[str]

    @property
    def summary(self) -> str:
        return "; ".join(self.reasons)


def judge(policy: Policy, phase: str, estimate: PhaseEstimate, verification: dict[str, dict[str, str]]) -> Verdict:
    """Approve when every budget holds."""
    blockers: list[str] = []
    passed: list[str] = []
    if estimate.fits is False:
        blockers.append(f"the plan does not fit: {estimate.verdict or 'not enough disk'}")
    failed = [name for name, check in verification.items() if check["status"] == "fail"]
    warned = [name for name, check in verification.items() if check["status"] == "warn"]
    if failed:
        blockers.append(f"verification failed: {', '.join(failed)}")
    elif warned and not policy.allow_warnings:
        blockers.append(f"verification warned ({', '.join(warned)}) and the policy allows no warnings")
    else:
        passed.append("verification " + ("has warnings only" if warned else "all ok"))
    for hours, limit, label in (
        (estimate.phase_hours, policy.max_phase_hours, "phase"),
        (estimate.total_hours, policy.max_total_hours, "run"),
    ):
        if limit is not None and hours is not None:
            within = hours <= limit
            (passed if within else blockers).append(
                f"{label} estimate {hours:.2f} h {'within' if within else 'over'} the budget of {limit:g} h"
            )
    disk = estimate.disk_bytes
    if policy.max_disk_bytes is not None and disk is not None:
        within = disk <= policy.max_disk_bytes
        (passed if within else blockers).append(
            f"{disk / 1e9:.2f} GB to write, {'within' if within else 'over'} the budget of "
            f"{policy.max_disk_bytes / 1e9:.2f} GB"
        )
    _judge_production(policy, estimate, blockers, passed)
    return Verdict(approve=not blockers, reasons=blockers or passed or [f"{phase}: no budget applies"])


def _judge_production(policy: Policy, estimate: PhaseEstimate, blockers: list[str], passed: list[str]) -> None:
    """A phase that must stop production is approved unattended only when the policy allows stops and the
    expected downtime is known and within its budget."""
    if estimate.production_action != "stop":
        return
    hours = estimate.downtime_hours
    shown = f"{hours:.2f} h" if hours is not None else "an unknown time"
    if not policy.allow_production_stop:
        blockers.append(f"the phase must stop production for {shown} and the policy does not allow_production_stop")
    elif policy.max_production_downtime_hours is None:
        passed.append(f"production stops for {shown} (allowed, no downtime budget)")
    elif hours is None or hours > policy.max_production_downtime_hours:
        blockers.append(f"production downtime {shown} is over the budget of {policy.max_production_downtime_hours:g} h")
    else:
        passed.append(f"production downtime {shown} within the budget of {policy.max_production_downtime_hours:g} h")


def load_policy(path: Path) -> Policy:
    try:
        return Policy.model_validate(tomllib.loads(path.read_text()))
    except FileNotFoundError:
        raise ConfigError(f"The policy file {path} does not exist.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"The policy file {path} is not valid TOML: {exc}.") from None
    except ValidationError as exc:
        raise ConfigError(f"The policy file {path} is invalid: {'; '.join(format_validation_error(exc))}.") from None


AUTO_APPROVE = Policy()
