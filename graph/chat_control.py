"""The pipeline as the operator chat drives it: each action starts or answers a run in the background
and returns at once with a short text for the agent (the chat never blocks on a phase)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from eyas.graph.answers import pending_view, record_gate_answer
from eyas.graph.runner import read_run
from eyas.graph.runs import RunDir, run_dir
from eyas.graph.state import Action, GateAnswer
from eyas.tools.config import EyasConfig
from eyas.tools.errors import EyasError
from eyas.tools.private_files import open_private

# The same interpreter and package as this process, wherever (and however) eyas is installed.
EYAS = [sys.executable, "-m", "eyas"]
STARTABLE = ("pipeline",)


class ChatPipeline:
    """Controls one pipeline run: the chat's own run when it is a pipeline run, else `<chat run>-pipeline`."""

    def __init__(self, chat_run: RunDir, config: EyasConfig) -> None:
        attached = chat_run.meta().get("kind") != "chat"
        self.run = chat_run if attached else run_dir(f"{chat_run.run_id}-pipeline")
        self.config_path = chat_run.meta().get("config")
        self.config = config

    def _started(self) -> bool:
        return self.run.checkpoints.exists()

    def status(self) -> str:
        if not self._started():
            return f"No pipeline run yet ({self.run.run_id}); start_phase('pipeline') starts one."
        stored = read_run(self.run)
        state, pending = stored.state, stored.pending
        lines = [
            f"run {self.run.run_id}: phase {state.get('phase')}, " + ("running" if self.run.is_driven() else "idle")
        ]
        for phase, ids in state.get("jobs", {}).items():
            lines.append(f"{phase}: jobs {', '.join(ids)}")
        if pending:
            view = pending[1]
            lines.append(f"waiting at the {view.get('kind')} gate of {view.get('phase')}: {json.dumps(view)[:1500]}")
        if state.get("stopped"):
            lines.append(f"stopped: {state['stopped']}")
        return "\n".join(lines)

    def start_phase(self, phase: str) -> str:
        if phase not in STARTABLE:
            raise EyasError(f"Unknown phase {phase!r}: the chat starts the whole pipeline ('pipeline').")
        if self._started():
            raise EyasError(f"Run {self.run.run_id} has started already; resume it or answer its gate.")
        args = ["run", "--run-id", self.run.run_id, *(["--config", self.config_path] if self.config_path else [])]
        return self._spawn(args, "started")

    def resume(self) -> str:
        if not self._started():
            raise EyasError("There is no pipeline run to resume; start one first.")
        if self.run.is_driven():
            return f"Run {self.run.run_id} is already being driven."
        return self._spawn(["resume", self.run.run_id], "resumed")

    def answer_gate(self, action: Action, reason: str) -> str:
        if not self._started():
            raise EyasError("There is no pipeline run, so no gate to answer.")
        gate_id, _ = pending_view(self.run)
        # Checked against the gate's kind (retry/abort at a failure gate) and claimed atomically: a second chat,
        # the dashboard or `eyas approve` answering the same gate gets "already answered by ... at ...".
        record_gate_answer(self.run, GateAnswer(action=action, reason=reason, who="operator (chat)"), gate_id)
        if self.run.is_driven():
            return f"{action} recorded; the running eyas continues."
        return f"{action} recorded; " + self._spawn(["resume", self.run.run_id], "resumed")

    def _spawn(self, args: list[str], what: str) -> str:
        """Drive the run in its own process, detached, logging to the run folder (it stops at the next gate)."""
        log = self.run.create().root / "driver.log"
        with open_private(log, "a") as out:
            subprocess.Popen(
                [*EYAS, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "EYAS_RUNS_DIR": str(self.run.root.parent)},
            )  # fmt: skip
        return f"{what} run {self.run.run_id} in the background; its log is {log}."
