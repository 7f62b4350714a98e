"""What a deploy leaves: its result as the run's deploy.json keeps it (production measured before and with
speculation, the drop-in, the argv), and the method an argv's --speculative-config set. The run's outcome and
headline read these without the deploy's own imports (the HTTP client, the metrics parser, the unit files)."""

from __future__ import annotations

import json

from pydantic import BaseModel

NOT_DEPLOYED_YET = "not deployed yet"  # the reason of a change planned (the gate's, a dry run's) but not made


class Probe(BaseModel):
    """Production measured over one window of probe traffic (temperature 0)."""

    requests: int
    completion_tokens: int
    seconds: float
    tokens_per_s: float
    mean_acceptance_length: float | None = None
    acceptance_rate: float | None = None
    drafts: float | None = None


class DeployResult(BaseModel):
    """A deploy's result, as deploy.json keeps it; a file from before a field existed reads with its default."""

    kept: bool
    reason: str
    drop_in: str
    drop_in_text: str
    share_drafter: str | None = None  # the command that lets production's User= read the drafter, if it needs one
    argv_before: list[str]
    argv_deployed: list[str]
    before: Probe | None = None
    after: Probe | None = None
    speedup: float | None = None
    restart_s: float | None = None
    rollback_restart_s: float | None = None
    downtime_s: float | None = None  # from each restart until production answered the health check again

    @property
    def acted(self) -> bool:
        """Whether production was restarted with the change (kept or rolled back), not only planned."""
        return self.reason != NOT_DEPLOYED_YET

    @property
    def method(self) -> str | None:
        """The speculative method the change put in (or tried): the drafter's, or n-gram speculation's."""
        return deployed_method(self.argv_deployed)


def deployed_method(argv: list[str]) -> str | None:
    """The method of the --speculative-config eyas's drop-in set (the last one in `argv`), None without one."""
    configs = [argv[at + 1] for at, arg in enumerate(argv[:-1]) if arg == "--speculative-config"]
    try:
        return str(json.loads(configs[-1])["method"]) if configs else None
    except (ValueError, KeyError, TypeError):
        return None
