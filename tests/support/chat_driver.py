"""`eyas chat`'s terminal program with a stand-in for the pipeline's controls (graph/ wires the real ones).

Stand-in: starting the run launches a real detached job on this machine (`sleep`, job `pipeline-run`),
so a test can see whether, and when, anything was launched.

    python chat_driver.py CONFIG
"""

from __future__ import annotations

import sys
from pathlib import Path

from eyas.agents.faces.cli.chat import converse, open_chat
from eyas.agents.operator_tools import GateAction
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec


class LaunchingControls:
    def __init__(self, workdir: str) -> None:
        self.jobs = Jobs(LocalHost(), workdir)

    def status(self) -> str:
        return "\n".join(f"{state.job_id}: {state.describe()}" for state in self.jobs.list()) or "no phase started"

    def start_run(self, sizes: dict[str, int]) -> str:
        state = self.jobs.launch(JobSpec(job_id="pipeline-run", argv=["/bin/sleep", "120"]))
        return f"run launched with {sizes}: job {state.job_id} {state.describe()} (pid {state.pid})"

    def resume(self) -> str:
        return "nothing to resume"

    def answer_gate(self, action: GateAction, reason: str) -> str:
        return "no gate is pending"

    def deploy_effect(self, drafter: str | None, k: int | None) -> str:
        return "this stand-in has no drafter to deploy"

    def deploy(self, drafter: str | None, k: int | None) -> str:
        return "this stand-in has no drafter to deploy"

    def rollback_effect(self) -> str:
        return "this stand-in deployed nothing"

    def rollback(self) -> str:
        return "this stand-in deployed nothing"


def main() -> None:
    config_path = Path(sys.argv[1])
    with open_chat(None, False, config_path, lambda run, config: LaunchingControls(config.host().workdir)) as chat:
        converse(chat, input, print)


if __name__ == "__main__":
    main()
