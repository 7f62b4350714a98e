"""graph/checkpoint_read.py reads a run's last checkpoint as LangGraph does, without importing it: on real runs (the
real graph and checkpoint DB) waiting at a gate, ended, stopped before a node, failed in one and never started, it
gives the values, the nodes next and the questions waiting that LangGraph's own get_state gives. A checkpoint it does
not know is read by LangGraph instead. And the pipeline keeps to the shapes the reader knows: a join, a deferred node
or a fan-out at its top level fails here, before a stored run is misread."""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph._internal._constants import NULL_TASK_ID, RESUME  # the format under test is LangGraph's own
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.pregel._algo import task_path_str

from eyas.graph.checkpoint_read import BRANCH, START, StoredState, Unfamiliar, read_latest, state_channels
from eyas.graph.life.run_view import read_run
from eyas.graph.life.runner import checkpointer, graph_state, thread
from eyas.graph.life.session import run_meta
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.config_source import ConfigSource
from eyas.tools.settings.sizes import DEMO
from eyas.tools.sqlite_read import connect_read_only
from eyas.tools.target.embedded import EmbeddedTarget
from gated_runs import PLAN, run_at_data_gate, stored_run


def values(run_id: str, **more: Any) -> dict[str, Any]:
    verification = {"health": {"status": "ok", "message": "up and generating"}}
    return {"run_id": run_id, "sizes": DEMO.model_dump(), "plan": PLAN, "verification": verification,
            "decisions": [], **more}  # fmt: skip


def stored_as(runs: Path, state: dict[str, Any], node: str) -> RunDir:
    """A run whose last checkpoint is `state` as the node `node` leaves it (nothing driven after it)."""
    run = RunDir(runs / state["run_id"])
    run.write_meta(run_meta(ConfigSource(None, "a test", EmbeddedTarget(runs.parent / "cache", port=9)), None, DEMO))
    with checkpointer(run) as saver:
        build_graph(saver).update_state(thread(run), state, as_node=node)
    return run


def finished_unsaved(runs: Path, run_id: str, writes: list[tuple[str, Any]]) -> RunDir:
    """A run stopped before prepare_drafter whose prepare_drafter then finished, its writes saved as LangGraph saves
    them, but not the checkpoint after it (a driver killed between the two)."""
    run = stored_as(runs, values(run_id), "plan")
    with checkpointer(run) as saver:
        snapshot = build_graph(saver).get_state(thread(run))
        (task,) = snapshot.tasks
        saver.put_writes(snapshot.config, writes, task.id, task_path_str(task.path))
    return run


def given(run: RunDir, writes: list[tuple[str, Any]]) -> RunDir:
    """`run` given `writes` as input to the step it waits in: what `Command(resume=...)` records (an answer, before
    the gate's node ran again) or `Command(update=...)` (a key's new value)."""
    with checkpointer(run) as saver:
        saver.put_writes(build_graph(saver).get_state(thread(run)).config, writes, NULL_TASK_ID)
    return run


def failed_in_a_node(runs: Path) -> RunDir:
    """A run whose data gate raised (its sizes are out of bounds): LangGraph keeps the error as the step's write."""
    target = EmbeddedTarget(runs.parent / "cache", port=9)
    with pytest.raises(ValueError, match="samples"):
        stored_run(target, runs, values("failed", sizes={**DEMO.model_dump(), "samples": -1}), after="prepare_drafter")
    return RunDir(runs / "failed")


CASES: dict[str, tuple[Callable[[Path], RunDir], tuple[str, ...], int]] = {
    # how the run is made, the nodes next, the questions waiting
    "at a gate": (lambda runs: run_at_data_gate(runs, "gated"), ("gate_data",), 1),
    "answered, its node not yet run again": (
        lambda runs: given(run_at_data_gate(runs, "answered"), [(RESUME, {"action": "approve"})]),
        ("gate_data",),
        1,
    ),
    "ended": (lambda runs: stored_as(runs, values("ended"), "report"), (), 0),
    "ended, nothing decided": (lambda runs: stored_as(runs, {"run_id": "bare"}, "report"), (), 0),
    "stopped before a node": (lambda runs: stored_as(runs, values("stopped"), "plan"), ("prepare_drafter",), 0),
    "never started": (lambda runs: stored_as(runs, values("fresh"), START), ("research",), 0),
    "failed in a node": (failed_in_a_node, ("gate_data",), 0),
    "finished, its checkpoint not written": (
        lambda runs: finished_unsaved(runs, "unsaved", [(BRANCH + "gate_data", None)]),
        (),
        0,
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    folder = tmp_path_factory.mktemp("stored") / "runs"
    return {case: make(folder) for case, (make, _, _) in CASES.items()}


def read(run: RunDir) -> StoredState:
    connection = connect_read_only(run.checkpoints)
    try:
        return read_latest(connection, run.run_id, RunState)
    finally:
        connection.close()


@pytest.mark.parametrize("case", list(CASES))
def test_the_reader_sees_what_langgraph_sees(runs: dict[str, RunDir], case: str) -> None:
    _, following, questions = CASES[case]
    seen = read(runs[case])
    assert seen == graph_state(runs[case])
    assert (seen.next, len(seen.interrupts)) == (following, questions)
    assert seen.values["run_id"] == runs[case].run_id and seen.values["decisions"] == []  # [] when none was stored


def test_the_gate_waiting_is_read_with_its_view(runs: dict[str, RunDir]) -> None:
    view = read_run(runs["at a gate"])
    assert view.pending is not None and view.pending[1]["phase"] == "data" and not view.ended


def test_checkpoints_the_reader_does_not_know_are_read_by_langgraph(tmp_path: Path) -> None:
    """A set in the state is stored as one of LangGraph's own extension types, which only LangGraph rebuilds; a node's
    output not yet in a checkpoint, or a key's new value given to a step, is applied with the key's reducer, which
    only LangGraph knows."""
    runs = tmp_path / "runs"
    odd = stored_as(runs, values("odd", gpus={"ids": {0, 1}}), "report")
    unsaved = finished_unsaved(runs, "unsaved", [("phase", "data"), (BRANCH + "gate_data", None)])
    updated = given(stored_as(runs, values("updated", phase="plan"), "plan"), [("phase", "data")])
    for run in (odd, unsaved, updated):
        with pytest.raises(Unfamiliar):
            read(run)
        assert read_run(run).state == graph_state(run).values
    assert read_run(odd).state["gpus"] == {"ids": {0, 1}}
    assert read_run(unsaved).state["phase"] == read_run(updated).state["phase"] == "data"


class FewerKeys(TypedDict, total=False):
    """A later eyas's state, which has dropped `plan`: LangGraph would skip the key, or fail to resume the run."""

    run_id: str
    decisions: Annotated[list[dict[str, Any]], operator.add]


def test_a_stored_key_the_state_has_not_is_left_to_langgraph(runs: dict[str, RunDir]) -> None:
    connection = connect_read_only(runs["ended"].checkpoints)
    try:
        with pytest.raises(Unfamiliar, match="channel plan"):
            read_latest(connection, "ended", FewerKeys)
    finally:
        connection.close()


def test_the_pipeline_keeps_to_the_shapes_the_reader_knows() -> None:
    """Each node is woken by its own branch channel alone, which LangGraph clears once the node ran; the state's keys
    are the values LangGraph reads, and the keys with a reducer are those the reader gives an empty value. A change
    here (a join edge, `defer=True`, a `Send` at the top level, a reducer of another kind) needs
    graph/checkpoint_read.py taught first."""
    graph = build_graph()
    assert {name: list(node.triggers) for name, node in graph.nodes.items()} == {
        name: [START if name == START else BRANCH + name] for name in graph.nodes
    }
    state = state_channels(RunState)
    assert graph.stream_channels_asis == list(state)
    branches = {BRANCH + name for name in graph.nodes if name != START}
    assert all(isinstance(graph.channels[channel], EphemeralValue) for channel in {*branches, START})
    assert set(graph.channels) == {*state, START, "__pregel_tasks", *branches}  # the last: sends, absent unless sent
    reduced = {
        key: channel.get() for key, channel in graph.channels.items() if isinstance(channel, BinaryOperatorAggregate)
    }
    assert reduced == {key: empty() for key, empty in state.items() if empty is not None}
