"""What each job asks of a Ray cluster: its kind (from its id) and the [cluster] resources set for that kind. Apart
from the executors, so that the Ray executor and the gate that shows the asks read one rule."""

from __future__ import annotations

from eyas.tools.settings.config import ClusterConfig, JobResources


def job_kind(job_id: str) -> str:
    """The kind a job id names: `<run>.<kind>` or, for a shard, `<run>.<kind>-<n>`."""
    return job_id.rsplit(".", 1)[-1].split("-", 1)[0]


def job_resources(cluster: ClusterConfig, job_id: str) -> JobResources:
    """What a job asks of the cluster: its kind's entry of `[cluster.resources]`, else nothing."""
    return cluster.resources.get(job_kind(job_id), JobResources())
