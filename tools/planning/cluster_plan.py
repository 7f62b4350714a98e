"""The plan on a cluster: how many jobs each phase runs in parallel (generation endpoints, extraction shards,
training nodes), the hours and bytes of each job, and, when the data does not fit one volume, how many nodes
with disks of their own would hold the hidden states.

The probes measure one endpoint and one node, so a phase over N jobs is planned at N times one job's speed:
an upper bound for generation and training (shared prompts, gradient all-reduces), close for extraction.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field


class ClusterShape(BaseModel):
    """What `[cluster]` spreads a run over; all 1 on one host."""

    endpoints: int = Field(1, gt=0, description="generation jobs, one per vLLM endpoint")
    extract_shards: int = Field(1, gt=0)
    train_nodes: int = Field(1, gt=0)
    node_free_disk_bytes: int | None = Field(None, ge=0, description="free space of each node's own data disk")

    @property
    def spread(self) -> bool:
        return max(self.endpoints, self.extract_shards, self.train_nodes) > 1


class ShardPlan(BaseModel):
    """One phase's jobs: how many run at once, the hours each takes and the bytes each writes."""

    phase: Literal["generation", "extraction", "training"]
    jobs: int
    hours_each: float
    bytes_each: int


def phase_jobs(shape: ClusterShape) -> dict[str, int]:
    return {"generation": shape.endpoints, "extraction": shape.extract_shards, "training": shape.train_nodes}


def shard_plans(shape: ClusterShape, hours: dict[str, float], written: dict[str, int]) -> list[ShardPlan]:
    """Each phase of more than one job, from the phase's wall hours (already divided by its jobs) and the bytes
    its jobs write between them (training's nodes write none of their own: node 0 writes the checkpoints)."""
    return [
        ShardPlan(
            phase=phase,
            jobs=jobs,
            hours_each=hours[phase],
            bytes_each=math.ceil(written.get(phase, 0) / jobs),
        )
        for phase, jobs in phase_jobs(shape).items()
        if jobs > 1
    ]


def nodes_for_hidden_states(shape: ClusterShape, hidden_bytes: int, reserve_bytes: int) -> int | None:
    """The fewest nodes whose own disks hold the hidden states between them, each keeping `reserve_bytes`
    free; None when the node disks are unknown, or when one node would do (the plan's other ways out say so)."""
    if shape.node_free_disk_bytes is None:
        return None
    room = shape.node_free_disk_bytes - reserve_bytes
    if room <= 0:
        return None
    nodes = math.ceil(hidden_bytes / room)
    return nodes if nodes >= 2 else None
