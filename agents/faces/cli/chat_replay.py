"""Replaying a recorded `eyas chat` offline: the same operator graph, its LLM, hosts, HTTP, clock and pipeline
controls answered from the transcript, and the operator's recorded lines typed again, turn by turn.

A chat resumed later (`eyas chat --resume`) recorded one run event per session; the sessions replay in order
on one in-memory checkpoint, so each continues the conversation where the last one left it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from eyas.agents.faces.cli.chat import Hosts, assemble, converse
from eyas.agents.operator_control import BoundaryControl
from eyas.graph.runs import run_dir
from eyas.tools.errors import EyasError
from eyas.tools.recording.boundary import ReplayError
from eyas.tools.recording.replay import ReplayReport, ReplaySession
from eyas.tools.recording.transcript import RunEvent
from eyas.tools.settings.config import EyasConfig, format_validation_error


def is_chat(start: RunEvent) -> bool:
    return start.meta.get("kind") == "chat"


def replay_chat(session: ReplaySession, path: Path) -> tuple[ReplayReport, dict[str, Any]]:
    """Replay every session of the chat; returns the report and the conversation's last state."""
    saver = InMemorySaver()
    state: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="eyas-replay-") as scratch:
        try:
            for start in [event for event in session.transcript.events if isinstance(event, RunEvent)]:
                session.note("run", {"meta": start.meta, "config": start.config, "input": start.input})
                state = _replay_session(session, start, path, Path(scratch), saver)
        except ReplayError:
            pass  # the report says where
    return session.report(), state


def _replay_session(
    session: ReplaySession, start: RunEvent, path: Path, scratch: Path, saver: InMemorySaver
) -> dict[str, Any]:
    try:
        cfg = EyasConfig.model_validate(start.config)
    except ValidationError as exc:
        raise EyasError(
            f"{path}: its run event (#{start.seq}) does not describe a chat this eyas can assemble again: "
            f"{'; '.join(format_validation_error(exc))}. Replay an unmodified recording of `eyas chat`."
        ) from None
    run_id, thread = (start.input or {}).get("run_id"), (start.input or {}).get("thread")
    if not isinstance(run_id, str) or not isinstance(thread, str):
        raise EyasError(f"{path}: its run event (#{start.seq}) names no run id and thread; it is not a chat's.")
    hosts = Hosts(cfg, session.host)
    control = BoundaryControl(session, None) if start.meta.get("control") else None
    chat = assemble(
        cfg, session, hosts, run_dir(run_id, scratch), control, saver, thread, bool(start.meta.get("resumed"))
    )
    # Nothing is read from a terminal: every line comes from the transcript's operator events.
    converse(chat, _no_terminal, lambda text: None)
    return dict(chat.session.graph.get_state(chat.session.config).values)


def _no_terminal(prompt: str) -> str:
    raise AssertionError("a replayed chat types the recorded lines; it never reads a terminal")
