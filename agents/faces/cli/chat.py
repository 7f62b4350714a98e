"""`eyas chat`: the operator session in the terminal, checkpointed and recorded in its run folder."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from eyas.agents.faces.cli.flags import ConfigOption
from eyas.agents.faces.cli.options import announce, use_config
from eyas.agents.prompts import prompt
from eyas.graph.runs import RunDir, list_runs, open_run, runs_root
from eyas.tools.errors import EyasError, NotFound
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.host import Host
from eyas.tools.private_files import write_private
from eyas.tools.recording.boundary import Boundary
from eyas.tools.recording.transcript import register_error_type
from eyas.tools.settings.config import EyasConfig
from eyas.tools.sqlite_write import writable_db
from eyas.tools.web.search import WebSearch

# The agents and the graph's modules (langgraph, ~0.5 s) load in the functions that use them, not at start-up of
# every eyas process.
if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from eyas.agents.llm import Usage
    from eyas.agents.operator import OperatorSession, Update
    from eyas.agents.operator_model import ModelNotice
    from eyas.agents.operator_tools import PipelineControl
    from eyas.tools.recording.recorder import Recorder
    from eyas.tools.recording.replay import ReplaySession

CHAT_STATE = "chat.json"  # which conversation thread of the run is current
CHAT_CHECKPOINTS = "chat.sqlite"
# A chat beside a pipeline run records apart: two processes never append to one transcript.
ATTACHED_TRANSCRIPT = "chat-transcript.jsonl"


@dataclass
class Chat:
    session: OperatorSession
    run: RunDir
    resumed: bool
    usage: Usage
    boundary: Boundary  # where the operator's lines cross: recorded live, typed again on replay
    model: ModelNotice


def chat_command(
    run: Annotated[str | None, typer.Option("--run", help="attach to this run (its config, folder, pipeline)")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="continue the last conversation (of --run, else of the newest chat)")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Talk to eyas's operator agent: it verifies the host, reads files, lists jobs and tails logs (independent
    tools at once), starts research, and asks you ("yes" to proceed) before anything that launches, cancels or
    answers a gate. The conversation is checkpointed (`eyas chat --resume` continues it) and recorded in the
    run folder, your typed lines included (`eyas replay` replays it offline). Type `exit` or Ctrl-D to leave."""
    from eyas.agents.faces.chat_control import ChatPipeline

    with open_chat(run, resume, config, control_for=ChatPipeline) as chat:
        converse(chat, input, print)


@contextmanager
def open_chat(
    run_id: str | None,
    resume: bool,
    config_path: Path | None,
    control_for: Callable[[RunDir, EyasConfig], PipelineControl | None] | None = None,
) -> Iterator[Chat]:
    """The chat of a new run, of `run_id`, or (resume) its last conversation; `control_for` gives the tools
    that drive the run's pipeline (none: the chat verifies, reads, lists, cancels and researches only)."""
    from eyas.agents.operator_control import BoundaryControl
    from eyas.graph.life.runner import redacted_saver
    from eyas.graph.life.session import open_recorder

    run, cfg, attached = _chat_run(run_id, resume, config_path)
    control = control_for(run, cfg) if control_for else None
    recorder = open_recorder(run, cfg, run.root / ATTACHED_TRANSCRIPT if attached else None)
    hosts = Hosts(cfg, lambda name: recorder.host(open_host(name, cfg.host(name))))
    try:
        with writable_db(run.root / CHAT_CHECKPOINTS) as connection:
            thread = _thread(run, resume)
            start = chat_start(run.run_id, cfg, thread, resumed=resume, attached=attached, control=control is not None)
            recorder.note("run", start)
            wired = BoundaryControl(recorder, control) if control is not None else None
            yield assemble(cfg, recorder, hosts, run, wired, redacted_saver(connection), thread, resume, shown_now)
    finally:
        hosts.close()
        recorder.close()


def shown_now(line: str) -> None:
    """A long tool's progress line (waiting for a server to load), shown while the tool still runs."""
    print(f"  .. {line}", flush=True)


def chat_start(run_id: str, cfg: EyasConfig, thread: str, **meta: bool) -> dict[str, Any]:
    """The chat's run event: what a replay needs to assemble the same chat (config, thread, controls)."""
    return {"meta": {"kind": "chat", **meta}, "config": cfg.model_dump(mode="json"),
            "input": {"run_id": run_id, "thread": thread}}  # fmt: skip


def assemble(
    cfg: EyasConfig,
    boundary: Recorder | ReplaySession,
    hosts: Hosts,
    run: RunDir,
    control: PipelineControl | None,
    checkpointer: BaseCheckpointSaver,
    thread: str,
    resumed: bool,
    progress: Callable[[str], None] = lambda line: None,
) -> Chat:
    """The operator session, every crossing through `boundary`: live and recorded, or answered by a replay."""
    from eyas.agents.llm import open_llm
    from eyas.agents.llm_choice import choose_llm
    from eyas.agents.operator import OperatorSession, build_operator_graph
    from eyas.agents.operator_model import model_notice
    from eyas.agents.operator_tools import OperatorEnv, operator_tools
    from eyas.agents.research import ResearchDeps, run_research
    from eyas.agents.toolbox import Toolbox

    http = boundary.http()
    choice = choose_llm(cfg, http, lambda: hosts(None))
    llm = open_llm(choice, boundary=boundary, on_retry=progress)

    def research(brief: str) -> str:
        deps = ResearchDeps(
            llm=llm,
            search=WebSearch(boundary=boundary),
            http=http,
            host=hosts(None),
            host_config=cfg.host(),
            target=cfg.target,
            out_dir=run.root,
            boundary=boundary,
        )
        report = run_research(brief, deps)
        summary = report.synthesis.summary if report.synthesis else "; ".join(report.notes)
        return f"Report: {report.path} ({len(report.sources)} sources, web {report.web}).\n{summary}"

    env = OperatorEnv(cfg, hosts, http, boundary.clock(), research=research, control=control, progress=progress)
    toolbox = Toolbox(operator_tools(env))
    system = prompt(
        "operator",
        host=cfg.target.host,
        target=f"{cfg.target.model} at {cfg.target.base_url}",
        run=run.run_id,
    )
    graph = build_operator_graph(llm, toolbox, system, llm.profile(), boundary, checkpointer)
    session = OperatorSession(graph, thread, toolbox)
    return Chat(session, run, resumed, llm.usage, boundary, model_notice(choice))


def converse(chat: Chat, read: Callable[[str], str], write: Callable[[str], None]) -> None:
    """The terminal loop: the operator's lines in (each recorded), the agent's answers, tool calls and
    questions out."""
    session = chat.session
    typed = operator_lines(chat.boundary, read)
    write(f"eyas chat, run {chat.run.run_id}, talking to {chat.model.shown}. Type exit (or Ctrl-D) to leave.")
    if chat.model.warning:
        write(f"warning: {chat.model.warning}")
    if chat.resumed:
        for message in session.history()[-6:]:
            if message["role"] in ("user", "assistant") and message.get("content"):
                write(f"{'you' if message['role'] == 'user' else 'eyas'}: {message['content']}")
    while True:
        pending = session.pending()
        try:
            if pending:
                write(_confirmation(pending))
                updates = session.answer(typed("confirm> "))
            else:
                line = typed("you> ").strip()
                if line in ("exit", "quit"):
                    break
                if not line:
                    continue
                updates = session.send(line)
            for update in updates:
                if update.kind != "confirm":  # asked above from the checkpoint, so a resumed chat asks it too
                    write(_shown(update))
        except (EOFError, KeyboardInterrupt):
            break
        except EyasError as exc:
            write(f"error: {exc}")
    usage = chat.usage.as_dict()
    write(f"\n{usage['calls']} LLM calls, {usage['total_tokens']} tokens. `eyas chat --resume` continues.")


def operator_lines(boundary: Boundary, read: Callable[[str], str]) -> Callable[[str], str]:
    """`read`, each line recorded as an operator event (leaving with Ctrl-D or Ctrl-C too): a replay types
    the recorded lines again, in order, and stops where they end."""

    def typed(prompt_text: str) -> str:
        def perform() -> dict[str, Any]:
            try:
                text = read(prompt_text)
            except (EOFError, KeyboardInterrupt):
                return {"closed": True}
            except UnicodeDecodeError:
                raise NotUtf8Line(NOT_UTF8) from None
            if not _utf8(text):
                raise NotUtf8Line(NOT_UTF8)  # recorded as the crossing's error, so a replay says it again
            return {"text": text}

        answer = boundary.cross("operator", {"prompt": prompt_text}, perform)
        if answer.get("closed") or answer.get("text") is None:
            raise EOFError("the operator left the chat")
        return str(answer["text"])

    return typed


@register_error_type
class NotUtf8Line(EyasError):
    """The operator's line was bytes that are not UTF-8: nothing is sent, and the chat asks again."""


NOT_UTF8 = (
    "That line is not UTF-8 text, so nothing was sent. Type it again; if your terminal sends another encoding, set "
    "a UTF-8 locale (export LANG=C.UTF-8) before `eyas chat`."
)


def _utf8(text: str) -> bool:
    """False for a line read from bytes that are not UTF-8 (Python keeps them as lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _confirmation(actions: list[str]) -> str:
    return "eyas wants to:\n" + "\n".join(f"  - {action}" for action in actions) + "\nProceed? [yes/no]"


def _shown(update: Update) -> str:
    if update.kind == "call":
        return f"  -> {update.text}"
    if update.kind == "result":
        lines = update.text.strip().splitlines() or [""]
        more = f" (+{len(lines) - 4} lines)" if len(lines) > 4 else ""
        return "\n".join(f"  <- {line}" for line in lines[:4]) + more
    return f"eyas: {update.text}"


def _chat_run(run_id: str | None, resume: bool, config_path: Path | None) -> tuple[RunDir, EyasConfig, bool]:
    """The run folder of the chat, its config (announced), and whether it belongs to a pipeline run."""
    from eyas.graph.life.run_source import run_source
    from eyas.graph.life.session import create_run

    if run_id is not None:
        if config_path is not None:
            raise EyasError(f"Run {run_id} keeps the config it was created with; drop --config.")
        run = open_run(run_id)
        return run, announce(run_source(run.meta())), run.meta().get("kind") != "chat"
    if resume:
        chats = [run for run in list_runs() if (run.root / CHAT_STATE).exists()]
        if not chats:
            raise NotFound(f"There is no chat to resume in {runs_root()}; start one with `eyas chat`.")
        return chats[-1], announce(run_source(chats[-1].meta())), chats[-1].meta().get("kind") != "chat"
    cfg, source = use_config(config_path)
    return create_run(source, None, None, kind="chat"), cfg, False


def _thread(run: RunDir, resume: bool) -> str:
    """The conversation's thread id: the current one when resuming, else a new one."""
    path = run.root / CHAT_STATE
    count = json.loads(path.read_text())["count"] if path.exists() else 0
    if not (resume and count):
        count += 1
        write_private(path, json.dumps({"count": count}))
    return f"chat-{count}"


class Hosts:
    """Hosts by config name, each opened once (from any tool thread): recorded live, or a replay's."""

    def __init__(self, config: EyasConfig, open_one: Callable[[str], Host]) -> None:
        self._config = config
        self._open_one = open_one
        self._open: dict[str, Host] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str | None) -> Host:
        key = name or self._config.target.host
        with self._lock:
            if key not in self._open:
                self._open[key] = self._open_one(key)
            return self._open[key]

    def close(self) -> None:
        for host in self._open.values():
            host.close()
