"""`eyas replay`: re-run a recorded run through the same graph code, offline, and report the first divergence.

Every crossing (host commands, files, HTTP, the clock, approvals) is answered from the transcript; the
clock is virtual, so ten recorded hours replay in seconds. A run that stopped at a gate and was resumed
replays as one; so does a run resumed after a crash: its resume event marks where the crash cut a node short,
and replay stops that try there and continues from the checkpoint the resume started from.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel, ValidationError, field_validator
from rich.markup import escape

from eyas.agents.faces.cli.console import console, print_json
from eyas.graph.policy import Policy
from eyas.graph.runs import RUN_ID_RULE, is_run_id, run_dir
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode
from eyas.tools.recording.boundary import ReplayError
from eyas.tools.recording.replay import CrashBoundary, ReplayReport, ReplaySession
from eyas.tools.recording.transcript import ResumeEvent, RunEvent
from eyas.tools.settings.config import EyasConfig, format_validation_error
from eyas.tools.settings.sizes import POLL_INTERVAL_S

# The graph's modules (langgraph, ~0.5 s) load in the functions that use them, not at start-up of every eyas process.
if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from eyas.graph.context import RunContext, RunGraph


class RecordedRun(BaseModel):
    """The inputs the run event recorded. A replay takes every one from here, never from where the transcript
    lies now: a copy in a folder of any name replays the same."""

    config: EyasConfig
    policy: Policy | None
    poll_interval_s: float
    input: dict[str, Any]

    @field_validator("input")
    @classmethod
    def _names_a_run(cls, value: dict[str, Any]) -> dict[str, Any]:
        run_id = value.get("run_id")
        if not isinstance(run_id, str) or not is_run_id(run_id):
            raise ValueError(f"run_id {run_id!r} is not a run id ({RUN_ID_RULE})")
        return value


def replay(path: Path) -> tuple[ReplayReport, dict[str, Any]]:
    """Replay a run's (or a chat's) transcript; returns the replay report and the final state the code reached."""
    from langgraph.checkpoint.memory import InMemorySaver

    from eyas.agents.faces.cli.chat_replay import is_chat, replay_chat
    from eyas.graph.context import RunContext
    from eyas.graph.pipeline import build_graph

    session = ReplaySession.load(path)
    start = next((event for event in session.transcript.events if isinstance(event, RunEvent)), None)
    if start is None:
        raise EyasError(f"{path} has no run event: it is not the transcript of an `eyas run` or `eyas chat`.")
    if is_chat(start):
        return replay_chat(session, path)
    session.note("run", {"meta": start.meta, "config": start.config, "input": start.input})
    try:
        recorded = RecordedRun.model_validate(
            {"config": start.config, "policy": start.meta.get("policy"), "input": start.input,
             "poll_interval_s": start.meta.get("poll_interval_s", POLL_INTERVAL_S)}
        )  # fmt: skip
    except ValidationError as exc:
        raise EyasError(
            f"{path}: its run event (#{start.seq}) does not describe a run this eyas can start again: "
            f"{'; '.join(format_validation_error(exc))}. Replay an unmodified recording of `eyas run`."
        ) from None
    config = recorded.config
    policy = recorded.policy
    state: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="eyas-replay-") as scratch:
        ctx = RunContext(
            config=config,
            host=session.host(config.target.host),
            http=session.http(),
            clock=session.clock(),
            run=run_dir(recorded.input["run_id"], Path(scratch)),
            boundary=session,
            # A replay notifies nobody.
            policy=policy.model_copy(update={"notify_command": None}) if policy else None,
            poll_interval_s=recorded.poll_interval_s,
        )
        graph = build_graph(InMemorySaver())
        state = _drive_every_try(session, graph, ctx, start.input)
    return session.report(), state


def _drive_every_try(session: ReplaySession, graph: RunGraph, ctx: RunContext, first: Any) -> dict[str, Any]:
    """Drive the run as each recorded process did: the first from its input, each `eyas resume` from the checkpoint
    its resume event names. A try that a crash cut short ends where its recording ends (CrashBoundary); a try
    that stopped at a gate ends there. Transcripts from before resume events continue after every gate stop."""
    from eyas.graph.life.resume_point import note_resume
    from eyas.graph.life.runner import drive, thread

    resumes = [event for event in session.transcript.events if isinstance(event, ResumeEvent)]
    state: dict[str, Any] = {}
    try:
        for index in range(len(resumes) + 1):
            session.crash_at(resumes[index].seq if index < len(resumes) else None)
            if index:
                graph = _from_the_resumed_checkpoint(graph, thread(ctx.run), resumes[index - 1])
                note_resume(session, graph, thread(ctx.run))
                first = None
            while True:
                try:
                    outcome = drive(graph, ctx, first, ask=None, on_update=lambda update: None)
                except CrashBoundary:
                    break
                state = outcome.state
                if outcome.finished or index < len(resumes) or not session.report().unconsumed:
                    break
                first = None
            state = dict(graph.get_state(thread(ctx.run)).values) or state
    except ReplayError:
        pass  # the report says where
    return state


def _from_the_resumed_checkpoint(graph: RunGraph, config: RunnableConfig, resumed: ResumeEvent) -> RunGraph:
    """The graph to drive a resumed try with. A try whose last checkpoint write failed (a full disk) left the live
    run a step behind the replay, whose checkpoints are in memory and never fail: the resume continued from an
    earlier checkpoint than replay reached. Replay then continues from that checkpoint alone, without the writes
    made after it, which the live run lost; when none has the recorded step, the resume event's check says so."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.memory import InMemorySaver

    from eyas.graph.life.resume_point import resume_point
    from eyas.graph.pipeline import build_graph

    here = resume_point(graph, config)
    saver = graph.checkpointer
    if (here["step"], here["next"]) == (resumed.step, resumed.next) or not isinstance(saver, BaseCheckpointSaver):
        return graph
    for snapshot in graph.get_state_history(config):
        if (snapshot.metadata or {}).get("step") != resumed.step:
            continue
        saved = saver.get_tuple(snapshot.config)
        if saved is None:
            break
        alone = InMemorySaver()
        parent = saved.parent_config or {"configurable": {**config["configurable"], "checkpoint_ns": ""}}
        alone.put(parent, saved.checkpoint, saved.metadata, saved.checkpoint["channel_versions"])
        return build_graph(alone)
    return graph


def replay_command(
    transcript: Annotated[Path, typer.Argument(help="a run's transcript.jsonl (runs/<run>/transcript.jsonl)")],
    json_output: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Replay a recorded run or chat offline: no network, host or LLM (a chat's typed lines come from the
    transcript, turn by turn). Succeeds when the code made exactly the recorded decisions; says no at the first
    divergence (shown as a diff of recorded versus live) or when the transcript's hash chain names an altered or
    removed event."""
    report, state = replay(transcript)
    if json_output:
        print_json(
            {
                "events_total": report.events_total,
                "events_replayed": report.events_replayed,
                "divergence": report.divergence,
                "unconsumed": len(report.unconsumed),
                "warnings": report.warnings,
                "chain": report.chain.model_dump(exclude_none=True),
                "final_state": state,
            }
        )
    else:
        for warning in report.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}")
        console.print(f"replayed {report.events_replayed} of {report.events_total} events of {escape(str(transcript))}")
        chain_style = "bold red" if not report.chain.intact else "dim"
        console.print(f"[{chain_style}]{escape(report.chain.describe(str(transcript)))}[/]", highlight=False)
        if report.divergence:
            info = report.divergence
            console.print(f"[bold red]diverged[/] at event {info.seq} ({escape(f'{info.kind}, task {info.task}')}):")
            console.print(info.diff, markup=False, highlight=False)
        elif report.unconsumed:
            console.print(f"[yellow]{len(report.unconsumed)} recorded events were never asked for[/]")
        elif report.chain.intact and "messages" in state:
            console.print(f"[green]no divergence[/]; the conversation has {len(state['messages'])} messages")
        elif report.chain.intact:
            console.print(f"[green]no divergence[/]; final phase {escape(str(state.get('phase')))}")
    raise typer.Exit(ExitCode.OK if report.ok else ExitCode.NO)
