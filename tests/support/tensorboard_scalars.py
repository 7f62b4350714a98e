"""A TensorBoard directory's scalars as TensorBoard itself reads them (its EventAccumulator, every event kept)."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Each scalar tag's (step, value) pairs in step order, after the reader's purge of restarted steps (a tag whose
    every event was purged is left out, as TensorBoard shows it no chart)."""
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    scalars = {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }
    return {tag: values for tag, values in scalars.items() if values}
