"""The run's state: small JSON values only (artifacts by path, never data), so checkpoints stay small."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class Sizes(TypedDict, total=False):
    """What the operator can edit at a gate; everything else is derived from these and the host."""

    samples: int
    max_tokens: int  # of each generated answer
    max_seq_len: int  # of a whole conversation, for extraction and training
    concurrency: int
    draft_vocab_size: int
    epochs: int
    num_speculative_tokens: int


class Failure(TypedDict):
    phase: str
    job_id: str
    status: str
    log_tail: str
    diagnosis: str


class Decision(TypedDict):
    gate: str
    action: str  # approve | reject | edit | retry | abort
    reason: str
    who: str  # operator | policy | cli


class RunState(TypedDict, total=False):
    run_id: str
    phase: str
    sizes: Sizes
    verification: dict[str, dict[str, str]]  # check -> {status, message}
    free_disk_bytes: int
    plan: dict[str, Any]
    jobs: dict[str, list[str]]  # phase -> job ids (the job registry)
    artifacts: dict[str, str]  # name -> path on the host
    decisions: Annotated[list[Decision], operator.add]
    failure: Failure | None
    evaluation: dict[str, Any]
    research: str | None
    report: str
    stopped: str | None  # why the run ended early (rejected, aborted)
