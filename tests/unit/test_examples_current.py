"""The recorded examples match today's workload scripts: checked here in the fast tier, because a workload edited
after `make examples` otherwise shows only as a replay divergence half an hour into the whole suite."""

from __future__ import annotations

import pytest

from recorded_examples import EXAMPLES, recorded_examples, stale_workloads


@pytest.mark.parametrize("example", recorded_examples())
def test_each_example_was_recorded_with_the_workload_scripts_as_they_are(example: str) -> None:
    stale = stale_workloads(EXAMPLES / example / "transcript.jsonl")
    assert not stale, f"runs/examples/{example} was recorded with other versions of {', '.join(stale)}: `make examples`"
