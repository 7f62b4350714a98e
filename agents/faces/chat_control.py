"""The pipeline as the operator chat drives it: each action starts or answers a run in the background
and returns at once with a short text for the agent (the chat never blocks on a phase)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from pydantic import ValidationError

from eyas.agents.faces.gate_text import gate_text
from eyas.agents.faces.job_table import job_rows
from eyas.agents.faces.progress_text import detail_text
from eyas.agents.operator_tools import size_flags
from eyas.agents.service_tools import command_change, downtime
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.view import read_view
from eyas.graph.life.answers import pending_view, record_gate_answer
from eyas.graph.life.run_view import read_run
from eyas.graph.phases.deploy.record import DEPLOY_FILE, deploy_record
from eyas.graph.phases.evaluate.record import run_evaluation
from eyas.graph.policy import started_policy
from eyas.graph.runs import RunDir, run_dir
from eyas.graph.state import Action, GateAnswer, run_plan
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.private_files import open_private
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import drop_in_text
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import EyasConfig, format_validation_error
from eyas.tools.settings.sizes import starting_sizes
from eyas.tools.workloads.speculative import drafter_config

# The same interpreter and package as this process, wherever (and however) eyas is installed.
EYAS = [sys.executable, "-m", "eyas"]
PLAN_TIMEOUT_S = 900  # the throughput probe runs real completions on the target
DEPLOY_TIMEOUT_S = 3 * Thresholds().ready_timeout_s  # a deploy restarts production twice at worst, and probes


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
            view = read_view(pending[1])
            kind = "failure" if isinstance(view, FailureView) else "approval"
            lines.append(f"waiting at the {kind} gate of {view.phase}, which shows:\n{gate_text(view)}")
        if state.get("stopped"):
            lines.append(f"stopped: {state['stopped']}")
        return "\n".join([*lines, *self._progress(state)])

    def _progress(self, state: dict[str, Any]) -> list[str]:
        """What a person would look at: the plan's verdict, the last training loss, the measurements, each job's
        progress with its throughput, loss and ETA (from its log, as `eyas status RUN` shows it), the report."""
        lines = []
        if verdict := run_plan(state).verdict:
            lines.append(f"plan: {verdict}")
        if train := (state.get("training") or {}).get("train"):
            lines.append(f"training: step {train[-1].get('step')}, loss {train[-1].get('loss')}")
        if evaluation := run_evaluation(state):
            lines.append(
                f"evaluation: mean acceptance length {evaluation.mean_acceptance_length} at "
                f"k={evaluation.k}, speedup {evaluation.speedup}; n-gram speculation's speedup "
                f"{evaluation.ngram_speedup() or 'not measured'}"
            )
        rows, unreadable = job_rows(self.run, state)
        if unreadable:
            lines.append(f"the jobs' progress could not be read: {unreadable}")
        for row in rows:
            seen = row["progress"]
            said = detail_text({key: seen.get(key) for key in ("tokens_per_s", "loss")})
            figures = f", {said}" if said else ""
            eta = f", ETA {row['eta']}" if row["eta"] else ""
            lines.append(f"job {row['job_id']} ({row['phase']}): {row['state']} {row['bar']}{figures}{eta}")
        reports = [path for path in (self.run.root / "report.html", self.run.report) if path.exists()]
        if reports:
            lines.append("report: " + ", ".join(str(path) for path in reports))
        lines.append(f"the same in a terminal: eyas status {self.run.run_id}")
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
        done = self._eyas(["plan", "--json", *config, *size_flags(sizes)], PLAN_TIMEOUT_S)
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

    def _drafter(self, drafter: str | None, k: int | None) -> tuple[str, int]:
        """The drafter directory and k a deploy uses: the ones asked for, else the run's trained drafter and its k."""
        if not self._started():
            raise EyasError(f"There is no pipeline run ({self.run.run_id}) whose drafter to deploy; start one first.")
        state = read_run(self.run).state
        chosen = drafter or state.get("artifacts", {}).get("drafter")
        if not chosen:
            raise EyasError(
                f"Run {self.run.run_id} has no trained drafter yet: pass drafter (a directory on the target host)."
            )
        return chosen, k or int(state.get("sizes", {}).get("num_speculative_tokens", 3))

    def deploy_effect(self, drafter: str | None, k: int | None) -> str:
        """Production's command line now and with the drafter (read from its unit), the thresholds, the downtime."""
        drafter_dir, spec_k = self._drafter(drafter, k)
        policy = started_policy(self.run.meta())
        with open_host(self.config.target.host, self.config.host()) as host:
            service = production_service(self.config, host, HttpClient(SYSTEM_CLOCK), SYSTEM_CLOCK)
            if host.exists(service.drop_in_path()):
                raise EyasError(f"{service.drop_in_path()} exists: a drafter is deployed already; roll it back first.")
            unit = service.effective_unit()
            _, argv = drop_in_text(unit, drafter_config(drafter_dir, spec_k))
        return (
            f"deploy {drafter_dir} (k={spec_k}) into production for run {self.run.run_id}: restart it, send "
            f"{policy.deploy_probe_requests} probe requests, keep the drafter only at a mean acceptance length of "
            f"{policy.deploy_min_acceptance_length:g} or more and a speedup of {policy.deploy_min_speedup:g}x or more "
            "(tokens/s with the drafter over without), else roll back (a second restart)\n"
            f"    {command_change(unit.exec_start, argv)}\n"
            f"    expected downtime: {downtime(self.config, None)} per restart"
        )

    def deploy(self, drafter: str | None, k: int | None) -> str:
        drafter_dir, spec_k = self._drafter(drafter, k)
        # --yes: the operator confirmed in the chat (deploy_effect); the subprocess's stdin is no terminal.
        args = ["deploy", self.run.run_id, "--drafter", drafter_dir, "--k", str(spec_k), "--yes"]
        done = self._eyas(args, DEPLOY_TIMEOUT_S)
        return self._outcome("deploy", done, {0: "kept in production", 4: "rolled back"})

    def rollback_effect(self) -> str:
        """From the run's deploy.json: production's command line with the drafter, and without it again."""
        deployed = deploy_record(self.run)
        if deployed is None:
            raise EyasError(
                f"Run {self.run.run_id} has deployed no drafter ({self.run.root / DEPLOY_FILE} is absent): nothing "
                "to roll back."
            )
        if not deployed.kept:
            raise EyasError(
                f"Run {self.run.run_id}'s drafter is not in production (rolled back: {deployed.reason}); production "
                "runs its old command line."
            )
        return (
            f"remove {deployed.drop_in} from production and restart it\n"
            f"    {command_change(deployed.argv_deployed, deployed.argv_before)}\n"
            f"    expected downtime: {downtime(self.config, None)}"
        )

    def rollback(self) -> str:
        done = self._eyas(["rollback", self.run.run_id, "--yes"], DEPLOY_TIMEOUT_S)  # confirmed in the chat
        return self._outcome("rollback", done, {0: "done"})

    def _outcome(self, what: str, done: subprocess.CompletedProcess[str], meanings: dict[int, str]) -> str:
        """eyas's own last lines, with what its exit status means; a failure is the agent's to explain."""
        said = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
        if done.returncode not in meanings:
            raise EyasError(f"eyas {what} for run {self.run.run_id} failed (exit {done.returncode}): {said}")
        return f"eyas {what} for run {self.run.run_id}: {meanings[done.returncode]}.\n{said}"

    def _eyas(self, args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """`eyas ARGS` in its own process, this run's folder as its runs folder, its output captured."""
        env = {**os.environ, "EYAS_RUNS_DIR": str(self.run.root.parent), "COLUMNS": "200"}
        return subprocess.run(
            [*EYAS, *args], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, env=env
        )

    def _spawn(self, args: list[str], what: str) -> str:
        """Drive the run in its own process, detached, logging to the run folder (it stops at the next gate)."""
        log = self.run.create().root / "driver.log"
        with open_private(log, "a") as out:
            subprocess.Popen(
                [*EYAS, *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "EYAS_RUNS_DIR": str(self.run.root.parent)},
            )  # fmt: skip
        return f"{what} run {self.run.run_id} in the background; its log is {log}."
