"""What the deploy gate proposes, typed: `DeployChange`, the `deploy` part of its GateView (graph/gates/deploy.py
builds it). The gate, the dry run, the terminal, the dashboard and the chat read these fields, never keys."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from eyas.graph.state import Record
from eyas.tools.service.deploy import Thresholds

Number = int | float  # a figure as evaluate.py wrote it: an int stays an int, so the view dumps as it was recorded


class DeployEvaluation(Record):
    """The evaluation's figures the deploy gate shows beside the change (evaluation.json's, None where unmeasured)."""

    mean_acceptance_length: Number | None = None
    acceptance_rate: Number | None = None
    speedup: Number | None = None
    k: int | None = None
    prompts: int | None = None
    outputs_identical: bool | None = None
    intervals: dict[str, Any] | None = None
    ngram: dict[str, Any] | None = None


class DeployChange(Record):
    """The change the deploy gate asks for: the winner (its --speculative-config and k) beside every candidate, the
    thresholds production's counters must meet, the expected downtime, and once the change can be made, the service,
    its drop-in, production's argv before and after and the rollback. A change that cannot be made says why
    (`error`); where nothing beat the target alone, `nothing_pays` says which came closest and why."""

    drafter: str
    k: int | None = None
    speculative_config: dict[str, Any] | None = None
    thresholds: Thresholds
    expected_downtime_s: float
    downtime_source: str
    winner: str | None = None
    winner_reason: str | None = None
    candidates: dict[str, str] = Field(default_factory=dict)
    disagreement: str | None = None
    k_per_batch_size: str | None = None  # where the best k differs by concurrency: the schedule, or its recommendation
    nothing_pays: str | None = None
    error: str | None = None
    service: str | None = None
    backend: str | None = None
    drop_in: str | None = None
    drop_in_text: str | None = None
    argv_before: list[str] = Field(default_factory=list)
    argv_after: list[str] = Field(default_factory=list)
    rollback: list[str] = Field(default_factory=list)
    evaluation: DeployEvaluation | None = None

    @property
    def method(self) -> str | None:
        """The method the change deploys (the drafter's eagle3, n-gram); None where nothing is proposed."""
        return str(self.speculative_config["method"]) if self.speculative_config else None
