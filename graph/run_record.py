"""The shape of a run's run.json (graph/life/session.py's run_meta writes it): what a resume, `eyas runs` and the
watch read from it. Every field may be absent (a chat's record has no sizes, an older eyas's no build), but one
that is there has its type: a record whose `kind` is 5 was edited or overwritten, not written by eyas."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class EmbeddedRecord(BaseModel):
    """Where the embedded target of a run without a config file lives."""

    cache_dir: str
    port: int


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="allow")  # a later eyas may record more

    config: str | None = None  # the config file's absolute path; None: the embedded target
    embedded: EmbeddedRecord | None = None
    policy: dict[str, Any] | None = None
    sizes: dict[str, Any] | None = None
    eyas: dict[str, str | None] | None = None  # the build that created the run
    kind: str | None = None  # chat, research; None: a pipeline run
    poll_interval_s: float | None = None
    brief: str | None = None  # a research run's question
