"""What a deployed method must reach on production's own counters to stay, and how the deploy probes them: the
deploy's defaults, which a policy's deploy_* fields override. Apart from the deploy itself, so that reading a run's
policy (`eyas status`, `eyas runs`) does not load the HTTP client the deploy probes with."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from eyas.tools.service.keep_rule import KeepRule
from eyas.tools.workloads.speculative import DRAFTER_METHOD


class Thresholds(BaseModel):
    """What a deployed drafter must reach on production's own counters to stay."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_acceptance_length: float = Field(1.2, ge=1.0, description="mean tokens per target step with the drafter")
    # 1.0: a drafter that makes production slower than it was is rolled back, whatever its acceptance; an operator
    # who wants one anyway lowers it (deploy_min_speedup in the policy, --min-speedup on eyas deploy).
    min_speedup: float = Field(1.0, gt=0, description="tokens/s with the drafter over tokens/s before")
    # 0.05: a drafter that only matches n-gram speculation (no training, no drafter to serve) is not worth its upkeep.
    ngram_margin: float = Field(
        0.05, ge=0, description="how far the drafter's speedup must exceed n-gram speculation's evaluated speedup"
    )
    probe_requests: int = Field(8, gt=0, description="probe requests per measurement")
    probe_max_tokens: int = Field(32, gt=0, description="longest probe answer, in tokens")
    probe_timeout_s: float = Field(300.0, gt=0, description="deadline of one probe request")
    ready_timeout_s: float = Field(3600.0, gt=0, description="how long a restart may take to pass the health check")

    def keep_rule(self, ngram_speedup: float | None, method: str = DRAFTER_METHOD) -> KeepRule:
        """The rule these thresholds hold `method` to, against n-gram speculation's evaluated speedup."""
        return KeepRule(self.min_acceptance_length, self.min_speedup, self.ngram_margin, ngram_speedup, method)
