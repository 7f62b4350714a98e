"""What the operator's agent can do: the same tools as the pipeline, behind pydantic argument models.

Reads (verify, read a file, list jobs, tail a log, research, the run's status and plan, the service's status, a
wait for a loading server) run at once; anything that launches, cancels, answers a gate, restarts production or
deploys a drafter carries a confirmation question, asked in the chat before it runs (service_tools.py has the
service's). The pipeline itself (graph/) is reached only through `PipelineControl`, which the CLI passes in.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

from eyas.agents.service_tools import service_tools
from eyas.agents.toolbox import ToolDef
from eyas.tools.checks.result import config_checks
from eyas.tools.checks.verify import CHECKS, verify
from eyas.tools.hosts.clock import Clock
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.jobs.detached import Jobs
from eyas.tools.jobs.executor import JobExecutor, jobs_of
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import SIZE_LIMITS, Sizes

if TYPE_CHECKING:
    CheckName = str  # the names are known only at run time
else:
    CheckName = Literal[tuple(CHECKS)]  # pydantic validates against (and shows the agent) the checks' names
MAX_FILE_CHARS = 20000
GateAction = Literal["approve", "reject", "retry", "abort"]  # graph/state.py's actions, less edit (sizes)


class PipelineControl(Protocol):
    """The pipeline run the chat is attached to; graph/ implements it. Every method returns promptly
    (a phase is launched and supervised in the background) with a short text for the agent."""

    def status(self) -> str:
        """Where the run stands: its phase, its jobs, and the pending gate with its plan, if any."""
        ...

    def start_run(self, sizes: dict[str, int]) -> str:
        """Start the whole pipeline run in the background with these sizes (the rest: the target's defaults);
        it stops at its first gate. An EyasError when it has started already."""
        ...

    def plan(self, sizes: dict[str, int]) -> str:
        """`eyas plan` for these sizes: hours and disk per phase, whether it fits, the ways out; starts nothing."""
        ...

    def resume(self) -> str:
        """Continue the run from its last checkpoint."""
        ...

    def answer_gate(self, action: GateAction, reason: str) -> str:
        """Answer the gate the run waits at (approve/reject at an approval gate, retry/abort at a failure gate);
        an EyasError when none is pending, the action does not fit the gate, or someone answered it first."""
        ...

    def deploy_effect(self, drafter: str | None, k: int | None) -> str:
        """What deploying the run's drafter (or `drafter`) would change: production's command line before and after,
        and the downtime; changes nothing."""
        ...

    def deploy(self, drafter: str | None, k: int | None) -> str:
        """`eyas deploy` for the run: the drafter stays in production only when it passes the thresholds."""
        ...

    def rollback_effect(self) -> str:
        """What taking the deployed drafter out would change; changes nothing."""
        ...

    def rollback(self) -> str:
        """`eyas rollback` for the run: production back on its old command line."""
        ...


class Verify(BaseModel):
    """Check the live state of a host and its vLLM server, all checks at once: health (up AND generating),
    service (how it was started), gpus, disk, binaries (what a non-interactive shell finds), packages."""

    checks: list[CheckName] | None = Field(None, description="only these checks; default: all")
    host: str | None = Field(None, description="a host name from the config; default: the target's host")


class ReadFile(BaseModel):
    """Read a text file on a host (its end, when it is long)."""

    path: str = Field(min_length=1, max_length=1000)
    host: str | None = None


class ListJobs(BaseModel):
    """List eyas's detached jobs on a host, with their state."""

    host: str | None = None


class TailLog(BaseModel):
    """The last lines of a job's log."""

    job_id: str = Field(min_length=1, max_length=128)
    lines: int = Field(40, ge=1, le=500)
    host: str | None = None


class CancelJob(BaseModel):
    """Stop a running job and its whole process group."""

    job_id: str = Field(min_length=1, max_length=128)
    host: str | None = None


class Research(BaseModel):
    """Research a question with parallel researchers (web, and the host's installed tools) into a cited report."""

    brief: str = Field(min_length=3, max_length=2000)


class RunStatus(BaseModel):
    """Where the pipeline run stands: its phase, the gate it waits at with what the gate shows, the plan's verdict,
    each job's progress with its throughput, loss and ETA, the last training loss, the drafter's measurements and
    where its report is."""


def _size(name: str) -> Any:
    """A size the agent may choose, with the bounds `Sizes` checks (the agent sees them in the tool's schema)."""
    field = f"{Sizes.model_fields[name].description}; default: the target's"
    return Field(None, gt=0, le=SIZE_LIMITS[name], description=field)


class PlannedSizes(BaseModel):
    """The sizes a plan depends on, the same for planning a run and for starting it, so that the plan the operator
    saw is the plan of the run that starts (and the host's speed probe, measured at these shapes, is reused)."""

    samples: int | None = _size("samples")
    max_tokens: int | None = _size("max_tokens")
    max_seq_len: int | None = _size("max_seq_len")
    draft_vocab_size: int | None = _size("draft_vocab_size")
    epochs: int | None = _size("epochs")
    ttt_steps: int | None = _size("ttt_steps")
    concurrency: int | None = _size("concurrency")  # the throughput probe and the answer sample run at it

    def sizes(self) -> dict[str, int]:
        return {name: value for name, value in self.model_dump().items() if value is not None}


class StartRun(PlannedSizes):
    """Start the whole pipeline run in the background: verify, plan, then data, extract, vocab, train and
    evaluate, each behind its approval gate (it stops at the first one for an answer). Sizes not given take the
    defaults that fit the target. Asks the operator first, showing the exact command."""

    held_out: int | None = _size("held_out")


def size_flags(sizes: dict[str, int]) -> list[str]:
    """The `eyas run` flags for chosen sizes (each size's flag is its name with dashes)."""
    return [part for name, value in sizes.items() for part in (f"--{name.replace('_', '-')}", str(value))]


class ShowPlan(PlannedSizes):
    """Plan a run before anything starts, as `eyas plan` does: measure the target and the host, estimate the hours
    and the disk of each phase for these sizes, and say whether it fits, with the ways out when it does not.
    Re-plan by calling it again with other sizes; give the sizes the run will start with. Starts nothing, so it
    asks nothing."""


class ResumeRun(BaseModel):
    """Continue the pipeline run from its last checkpoint."""


class AnswerGate(BaseModel):
    """Answer the gate the pipeline run waits at: approve or reject at an approval gate; retry (relaunch the
    failed jobs) or abort (end the run) at a failure gate. A gate takes one answer: when another operator
    answered first, this says who and when, and changes nothing."""

    action: GateAction
    reason: str = Field("", max_length=500)


@dataclass
class OperatorEnv:
    config: EyasConfig
    host_for: Callable[[str | None], Host]  # a host by config name (None: the target's), opened once
    http: HttpClient
    clock: Clock
    research: Callable[[str], str] | None = None  # brief -> where the report is, and its summary
    control: PipelineControl | None = None
    progress: Callable[[str], None] = lambda line: None  # a long tool's progress lines, as they happen


def operator_tools(env: OperatorEnv) -> list[ToolDef]:
    def jobs(host: str | None) -> JobExecutor:
        """The host's jobs as every face sees them: on the target's host, the run's executor (Ray's, if so set)."""
        return jobs_of(env.config, host, env.host_for(host))

    def where(host: str | None) -> str:
        return host or env.config.target.host

    def run_verify(args: Verify) -> str:
        context = config_checks(env.config, env.host_for(args.host), env.http, args.host)
        report = verify(context, list(args.checks) if args.checks else None, env.clock)
        lines = [f"{r.name}: {r.status.value}: {r.message}" for r in report.results]
        return "\n".join([*lines, f"(wall {report.wall_s:.1f} s)"])

    def read_file(args: ReadFile) -> str:
        text = env.host_for(args.host).read_text(args.path)
        return text if len(text) <= MAX_FILE_CHARS else f"…(the last {MAX_FILE_CHARS} chars)\n{text[-MAX_FILE_CHARS:]}"

    def list_jobs(args: ListJobs) -> str:
        executor = jobs(args.host)
        if isinstance(executor, Jobs):  # a detached job's process and log file are on the host
            lines = [f"{s.job_id}: {s.describe()} (pid {s.pid}, log {s.directory}/log)" for s in executor.list()]
        else:  # a Ray job has neither there: Ray keeps its log, which tail_log reads
            lines = [f"{s.job_id}: {s.describe()} (on {s.host}; its log: tail_log)" for s in executor.list()]
        return "\n".join(lines) or f"No jobs on {where(args.host)}."

    def tail_log(args: TailLog) -> str:
        return jobs(args.host).tail(args.job_id, args.lines) or f"The log of {args.job_id} is empty or absent."

    def cancel_job(args: CancelJob) -> str:
        return f"{args.job_id}: {jobs(args.host).cancel(args.job_id).describe()}"

    defs = [
        ToolDef(Verify, run_verify),
        ToolDef(ReadFile, read_file),
        ToolDef(ListJobs, list_jobs),
        ToolDef(TailLog, tail_log),
        ToolDef(CancelJob, cancel_job, lambda a: f"cancel job {a.job_id} on host '{where(a.host)}'"),
    ]
    defs += service_tools(env.config, lambda: env.host_for(None), env.http, env.clock, env.progress, env.control)
    if env.research is not None:
        research = env.research
        defs.append(ToolDef(Research, lambda a: research(a.brief)))
    if env.control is not None:
        control = env.control
        defs += [
            ToolDef(RunStatus, lambda a: control.status()),
            ToolDef(ShowPlan, lambda a: control.plan(a.sizes())),
            ToolDef(
                StartRun,
                lambda a: control.start_run(a.sizes()),
                lambda a: (
                    "start the pipeline run in the background, stopping at its first gate: "
                    + shlex.join(["eyas", "run", *size_flags(a.sizes())])
                    + ("" if a.sizes() else " (every size at the target's default)")
                ),
            ),
            ToolDef(ResumeRun, lambda a: control.resume(), lambda a: "resume the pipeline run"),
            ToolDef(
                AnswerGate,
                lambda a: control.answer_gate(a.action, a.reason),
                lambda a: f"{a.action} the pending gate" + (f" ({a.reason})" if a.reason else ""),
            ),
        ]
    return defs
