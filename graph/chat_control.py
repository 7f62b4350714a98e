"""The pipeline as the operator chat drives it: each action starts or answers a run in the background
and returns at once with a short text for the agent (the chat never blocks on a phase)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from pydantic import ValidationError

from eyas.agents.operator_tools import size_flags
from eyas.graph.answers import pending_view, record_gate_answer
from eyas.graph.runner import read_run
from eyas.graph.runs import RunDir, run_dir
from eyas.graph.state import Action, GateAnswer
from eyas.tools.config import EyasConfig, format_validation_error
from eyas.tools.errors import EyasError
from eyas.tools.planning.sizes import starting_sizes
from eyas.tools.private_files import open_private

# The same interpreter and package as this process, wherever (and however) eyas is installed.
EYAS = [sys.executable, "-m", "eyas"]
PLAN_TIMEOUT_S = 900  # the throughput probe runs real completions on the target


class ChatPipeline:
    """Controls one pipeline run: the chat's own run when it is a pipeline run, else `<chat run>-pipeline`."""

    def __init__(self, chat_run: RunDir, config: EyasConfig) -> None:
        attached = chat_run.meta().get("kind") != "chat"
        self.run = chat_run if attached else run_dir(f"{chat_run.run_id}-pipeline")
        self.config_path = chat_run.meta().get("config")
        self.embedded = chat_run.meta().get("embedded") is not None
        self.config = config

    def _started(self) -> bool:
        return self.run.checkpoints.exists()

    def status(self) -> str:
        if not self._started():
            return f"No pipeline run yet ({self.run.run_id}); start_run starts one."
        stored = read_run(self.run)
        state, pending = stored.state, stored.pending
        lines = [
            f"run {self.run.run_id}: phase {state.get('phase')}, " + ("running" if self.run.is_driven() else "idle")
        ]
        for phase, ids in state.get("jobs", {}).items():
            lines.append(f"{phase}: jobs {', '.join(ids)}")
        if pending:
            view = pending[1]
            kind = "failure" if view.get("kind") == "failure" else "approval"
            lines.append(f"waiting at the {kind} gate of {view.get('phase')}: {json.dumps(view)[:1500]}")
        if state.get("stopped"):
            lines.append(f"stopped: {state['stopped']}")
        return "\n".join([*lines, *self._progress(state)])

    def _progress(self, state: dict[str, Any]) -> list[str]:
        """What a person would look at: the plan's verdict, the last training loss, the measurements, the report
        (read from the run's state and folder; the jobs' live progress is `eyas status RUN`'s)."""
        lines = []
        if verdict := state.get("plan", {}).get("verdict"):
            lines.append(f"plan: {verdict}")
        if train := (state.get("training") or {}).get("train"):
            lines.append(f"training: step {train[-1].get('step')}, loss {train[-1].get('loss')}")
        if evaluation := state.get("evaluation"):
            lines.append(
                f"evaluation: mean acceptance length {evaluation.get('mean_acceptance_length')} at "
                f"k={evaluation.get('k')}, speedup {evaluation.get('speedup')}"
            )
        reports = [path for path in (self.run.root / "report.html", self.run.report) if path.exists()]
        if reports:
            lines.append("report: " + ", ".join(str(path) for path in reports))
        lines.append(f"live job progress and ETA: eyas status {self.run.run_id}")
        return lines

    def start_argv(self, sizes: dict[str, int]) -> list[str]:
        """The `eyas run` arguments start_run spawns: this run's id and config, and the chosen sizes' flags
        (the same flags the chat's confirmation shows)."""
        config = ["--config", self.config_path] if self.config_path else []
        return ["run", "--run-id", self.run.run_id, *config, *size_flags(sizes)]

    def start_run(self, sizes: dict[str, int]) -> str:
        if self._started():
            raise EyasError(f"Run {self.run.run_id} has started already; resume it or answer its gate.")
        try:  # a bad size is the agent's to fix, said before anything starts
            chosen = starting_sizes(self.embedded, **sizes)
        except ValidationError as exc:
            raise EyasError("Those sizes are not valid: " + "; ".join(format_validation_error(exc))) from None
        started = self._spawn(self.start_argv(sizes), "started")
        return f"{started} Sizes: {json.dumps(chosen.model_dump())}."

    def plan(self, sizes: dict[str, int]) -> str:
        """`eyas plan --json` in its own process (it measures the target and the host), summed up for the agent."""
        config = ["--config", self.config_path] if self.config_path else []
        argv = [*EYAS, "plan", "--json", *config, *size_flags(sizes)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PLAN_TIMEOUT_S, stdin=subprocess.DEVNULL)
        try:
            plan = json.loads(done.stdout)
        except json.JSONDecodeError:
            problem = " ".join((done.stderr or done.stdout).split())[-800:]
            raise EyasError(f"eyas plan could not plan {sizes or 'the default sizes'}: {problem}") from None
        fits = "fits" if plan.get("fits") else "does NOT fit"
        return f"The plan for {sizes or 'the default sizes'} {fits}.\n{json.dumps(plan)[:3000]}"

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
