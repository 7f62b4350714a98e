"""Policies for unattended runs: approve a gate only when the phase fits its budgets, else stop and notify."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from eyas.graph.phases.deploy.tournament import DecidingConcurrency, Tournament, tournament
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.graph.run_facts import Check
from eyas.tools.errors import ConfigError
from eyas.tools.planning.prompt_supply import PromptSupply, supply_verdict
from eyas.tools.recording.redact import Redactor
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import format_validation_error
from eyas.tools.settings.local_files import UnreadableFile, read_text_file

# What happens after the evaluation: "ask" (the default) puts the deploy gate before production changes and waits
# for a person even in an unattended run, because a restart of production is the one step whose cost falls on its
# users, not on eyas; "auto" lets the policy approve it when the evaluation reaches the deploy thresholds; "skip"
# ends the run at its report (`eyas deploy RUN` later, by hand).
DeployMode = Literal["ask", "auto", "skip"]


_THRESHOLD: dict[str, Any] = {name: field.default for name, field in Thresholds.model_fields.items()}


class Policy(BaseModel):
    # No inf or nan budget: `max_phase_hours = inf` reads as a budget and approves everything, `nan` nothing.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_phase_hours: float | None = Field(None, gt=0, description="longest estimated phase approved unattended")
    max_total_hours: float | None = Field(None, gt=0, description="longest estimated whole run approved unattended")
    max_disk_bytes: int | None = Field(None, gt=0, description="most bytes a run may write on the host")
    allow_warnings: bool = Field(True, description="approve when verification has warnings (but no failures)")
    allow_production_stop: bool = Field(
        False, description="approve a phase that must stop the production server (its GPUs are needed)"
    )
    max_production_downtime_hours: float | None = Field(
        None,
        gt=0,
        description="longest production downtime (a downtime window's phase hours + one load) approved unattended",
    )
    deploy: DeployMode = Field(
        "ask", description="after the evaluation: ask a person before deploying, approve by the thresholds, or skip"
    )
    # Deploy (the deploy phase, eyas deploy): the drafter stays in production only at these or better; an "auto"
    # policy approves the deploy only when the evaluation reached them too.
    deploy_min_acceptance_length: float = Field(
        _THRESHOLD["min_acceptance_length"], ge=1.0,
        description="mean acceptance length production's own counters must show to keep the drafter",
    )  # fmt: skip
    deploy_min_speedup: float = Field(
        _THRESHOLD["min_speedup"], gt=0,
        description="tokens/s production serves with the drafter over tokens/s before it, to keep the drafter",
    )  # fmt: skip
    deploy_ngram_margin: float = Field(
        _THRESHOLD["ngram_margin"], ge=0,
        description="how far the drafter's speedup must exceed n-gram speculation's (evaluated on the same prompts)",
    )  # fmt: skip
    # "one": the evaluation at concurrency 1 decides, the figures with intervals, at the pace the deploy's probe
    # (one request at a time) confirms on production's own counters; "run": vLLM's bench at the run's concurrency,
    # for a production whose users keep it busy (point estimates, and a deploy probe that cannot confirm them).
    deploy_concurrency: DecidingConcurrency = Field(
        "one", description="where the winners at concurrency 1 and at the run's concurrency differ, which one decides"
    )
    deploy_probe_requests: int = Field(
        _THRESHOLD["probe_requests"], gt=0, description="probe requests per deploy measurement window"
    )
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

    @field_validator("notify_command")
    @classmethod
    def _no_secret_in_the_command(cls, command: str | None) -> str | None:
        # The policy is kept in the run's run.json (a resume and `eyas watch` run the command from there) and shown
        # in gate views and transcripts: a token written into the command would be stored and shown with it.
        if command is not None and Redactor().finds_secret(command):
            raise ValueError(
                f"holds what looks like a secret ({Redactor().text(command)}); it would be stored in each run's "
                "run.json and shown with the policy. Put the secret in an environment variable and refer to it in "
                "the command, e.g. notify_command = 'curl -H \"Authorization: Bearer $NOTIFY_TOKEN\" ...' (the "
                "command runs in a shell with eyas's environment)"
            )
        return command

    @field_validator("deploy_min_speedup", mode="before")
    @classmethod
    def _speedup_default(cls, value: object) -> object:
        """A run recorded before the threshold had a default kept None ("none"): it reads as the default now, so
        no deploy, resumed or by hand, keeps a drafter that makes production slower."""
        return _THRESHOLD["min_speedup"] if value is None else value

    def deploy_thresholds(self) -> Thresholds:
        """What the deployed drafter must reach on production's own counters to stay."""
        return Thresholds(
            min_acceptance_length=self.deploy_min_acceptance_length,
            min_speedup=self.deploy_min_speedup,
            ngram_margin=self.deploy_ngram_margin,
            probe_requests=self.deploy_probe_requests,
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


def judge(
    policy: Policy,
    phase: str,
    estimate: PhaseEstimate,
    verification: Mapping[str, Check | Mapping[str, str]],
    prompts: PromptSupply | None = None,
) -> Verdict:
    """Approve when every budget holds, and (at the data gate, which is given the plan's `prompts`) when the prompt
    source holds a prompt for every sample: hours of generation budgeted for prompts that do not exist are not."""
    blockers: list[str] = []
    passed: list[str] = []
    if estimate.fits is False:
        blockers.append(f"the plan does not fit: {estimate.verdict or 'not enough disk'}")
    if prompts is not None and prompts.enough is False:
        blockers.append(f"the prompt source holds too few prompts: {supply_verdict(prompts)}")
    statuses = {name: Check.model_validate(check).status for name, check in verification.items()}
    failed = [name for name, status in statuses.items() if status == "fail"]
    warned = [name for name, status in statuses.items() if status == "warn"]
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


def deploy_tournament(policy: Policy, evaluation: Mapping[str, Any] | None, run_concurrency: int) -> Tournament | None:
    """Every candidate the evaluation measured and the winner, by the policy's thresholds; None before it ran."""
    return policy_tournament(policy, Evaluation.model_validate(evaluation), run_concurrency) if evaluation else None


def policy_tournament(policy: Policy, evaluation: Evaluation, run_concurrency: int) -> Tournament:
    """The tournament over an evaluation already read, by the policy's thresholds and deciding concurrency."""
    return tournament(
        evaluation, policy.deploy_min_speedup, policy.deploy_ngram_margin, run_concurrency, policy.deploy_concurrency
    )


def judge_deploy(policy: Policy, evaluation: Mapping[str, Any] | None, run_concurrency: int) -> Verdict:
    """The deploy gate's verdict: "auto" approves when the evaluation's winner beats the target alone (and n-gram,
    where a drafter wins) by the thresholds production's counters will be held to, and a winning drafter's acceptance
    reaches its threshold; "ask" never approves (a person decides), but says how the evaluation compares."""
    blockers: list[str] = []
    passed: list[str] = []
    if policy.deploy == "ask":
        blockers.append('the policy\'s deploy = "ask": a person approves every change to production')
    found = deploy_tournament(policy, evaluation, run_concurrency)
    if found is None:
        return Verdict(approve=False, reasons=[*blockers, "nothing was evaluated"])
    choice = found.choice
    (passed if choice.pays else blockers).append(f"evaluation: {choice.reason}")
    if found.disagreement():
        passed.append(str(found.disagreement()))
    acceptance = choice.winner.mean_acceptance_length
    if choice.winner.method == "eagle3":
        within = acceptance is not None and acceptance >= policy.deploy_min_acceptance_length
        shown = f"{acceptance:.2f}" if acceptance is not None else "not measured"
        (passed if within else blockers).append(
            f"evaluation mean acceptance length {shown} {'reaches' if within else 'is under'} the threshold "
            f"{policy.deploy_min_acceptance_length:g}"
        )
    return Verdict(approve=not blockers, reasons=blockers + passed)


def load_policy(path: Path) -> Policy:
    try:
        return Policy.model_validate(tomllib.loads(read_text_file(path)))
    except UnreadableFile as exc:  # a directory, a FIFO or /dev/zero (refused before a read that would not end)
        raise ConfigError(
            f"The policy file {path} {exc.problem}. Pass --policy a TOML text file of budgets, such as "
            "max_total_hours = 12 (README, the overnight run's example)."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"The policy file {path} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise ConfigError(
            f"The policy file {path} nests tables or arrays deeper than Python's TOML reader can follow; a policy is "
            "one flat table of budgets, such as max_total_hours = 12 (README, the overnight run's example)."
        ) from None
    except ValidationError as exc:
        raise ConfigError(f"The policy file {path} is invalid: {'; '.join(format_validation_error(exc))}.") from None


def started_policy(meta: Mapping[str, Any]) -> Policy:
    """The policy a run started with, from its run.json (`meta`); a run a person drove at the terminal has none and
    is held to the defaults."""
    return Policy.model_validate(meta.get("policy") or {})


AUTO_APPROVE = Policy()
