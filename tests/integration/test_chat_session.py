"""A whole operator session through a real pty: `eyas chat` verifies the target, plans a run, re-plans it with
other sizes, launches it, answers the failure gate a lost job raises with retry, and deploys a drafter.

Stand-in: the agent LLM only (tests/support/openai_stub.py, scripted): no LLM that can drive the operator runs here (the
embedded SmolLM2 fills in tool calls that are well-formed and useless), so the agent's turns are scripted from the
operator's lines. Everything else is real and checked where it lands: `eyas chat` in a terminal, the `eyas plan`,
`eyas run`, `eyas resume` and `eyas deploy` processes it starts, the detached jobs, and the vLLM target that plays
production (its own instance, tests/support/production_target.py) with the stand-in service manager of containers. The
deploy is of a drafter production cannot load: it is rolled back to production's exact old argv (read from /proc),
the one test of that rollback (it costs two vLLM starts).
The generation job is killed the way an OOM kill looks, which raises the failure gate.
Production keeps /v1 behind a key in its unit (VLLM_API_KEY): every step above passes only if eyas read that key and
sent it with each request to production (issue 23), and the key is nowhere in what eyas wrote or printed but the
generation jobs' own secrets files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

import scripted_llm as s
from chat_example import config_text
from eyas.agents.faces.cli.replay import replay
from eyas.graph.life.run_view import read_run
from eyas.graph.runs import RunDir
from eyas.tools.checks.result import Status
from eyas.tools.target.embedded import EmbeddedTarget
from openai_stub import OpenAIStub
from pipeline_runs import EYAS, conversation_ids, job_dir
from production_target import PRODUCTION_KEY, server_argv, service
from terminal import Terminal
from waiting import wait_for

pytestmark = pytest.mark.slow

# The run is planned and started at the same sizes, TINY's (tests/support/pipeline_runs.py), so that the host's speed
# probe measures one shape for the whole session (at the planner's defaults it took 304 s here) and the plan probes
# the target at the run's own concurrency (at the default 256 each plan's probe took about a minute on two cores).
SIZES = {"max_tokens": 48, "max_seq_len": 256, "draft_vocab_size": 2048, "epochs": 1, "ttt_steps": 1, "concurrency": 4}
NO_DRAFTER = "/nonexistent/eyas-test-drafter"  # production cannot load it: the deploy is rolled back
# The operator's line -> the tool call the scripted agent makes for it.
WANTED: dict[str, tuple[str, dict[str, Any]]] = {
    "verify the target": ("verify", {"checks": ["health", "disk"]}),
    "plan 24 samples": ("show_plan", {"samples": 24, **SIZES}),
    "make it 16 samples": ("show_plan", {"samples": 16, **SIZES}),
    "start it": ("start_run", {"samples": 16, **SIZES}),
    "approve the data gate": ("answer_gate", {"action": "approve", "reason": "16 samples fit"}),
    "retry": ("answer_gate", {"action": "retry", "reason": "the job was killed"}),
    "deploy the drafter": ("deploy_drafter", {"drafter": NO_DRAFTER, "k": 3}),
}


script = s.operator_script(WANTED, "Done: ", 3, "I can verify, plan, start and answer the run, and deploy its drafter.")


def pending_kind(run: RunDir) -> str | None:
    """The kind and phase of the gate the run waits at, once no eyas drives it ("failure data")."""
    if not run.checkpoints.exists() or run.is_driven():
        return None
    pending = read_run(run).pending
    if pending is None:
        return None
    return f"{'failure' if pending[1].get('kind') == 'failure' else 'approval'} {pending[1].get('phase')}"


def say(terminal: Terminal, line: str, tool: str, timeout: float = 120) -> None:
    """Type a line at the prompt; the agent calls `tool`."""
    terminal.expect(r"you> ", timeout)
    terminal.send(line)
    terminal.expect(rf"  -> {tool}\(", 60)


def confirm(terminal: Terminal, asked: str, timeout: float) -> str:
    """Answer "yes" to the question the chat asks (which must match `asked`); the agent's answer after it."""
    question = terminal.expect(r"eyas wants to:\n((?:  .*\n|    .*\n)+)Proceed\? \[yes/no\]\nconfirm> ", 60)
    assert re.search(asked, question.group(1)), question.group(1)
    terminal.send("yes")
    return terminal.expect(r"eyas: Done: (.*)\n", timeout).group(1)


def holding(secret: str, *roots: Path) -> list[Path]:
    """The files under `roots` that hold `secret` as it is."""
    files = (path for root in roots for path in root.rglob("*") if path.is_file())
    return [path for path in files if secret.encode() in path.read_bytes()]


def test_a_whole_operator_session(production_target: EmbeddedTarget, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "EYAS_RUNS_DIR": str(runs), "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}
    argv_before = server_argv(production_target)
    # The key is live: production refuses /v1 without it (and vLLM leaves /health open).
    assert httpx.get(f"{production_target.base_url}/v1/models", timeout=30).status_code == 401
    assert httpx.get(f"{production_target.base_url}/health", timeout=30).status_code == 200
    with OpenAIStub(script) as stub:
        workdir = production_target.config().host().workdir
        config = config_text(Path(workdir), stub.url, target=production_target, prompts="sharegpt")  # TINY's source
        (tmp_path / "eyas.toml").write_text(config)
        terminal = Terminal([EYAS, "chat", "--config", str(tmp_path / "eyas.toml")], env, str(tmp_path))
        try:
            chat_id = terminal.expect(r"eyas chat, run (\S+), talking to stub-model", 120).group(1)
            run = RunDir(runs / f"{chat_id}-pipeline")

            say(terminal, "verify the target", "verify")
            terminal.expect(r"  <- health: (ok|warn): ", 120)

            say(terminal, "plan 24 samples", "show_plan")
            terminal.expect(r"eyas: Done: The plan for \{'samples': 24, .*'concurrency': 4\} fits", 600)
            say(terminal, "make it 16 samples", "show_plan")
            terminal.expect(r"eyas: Done: The plan for \{'samples': 16, .*'concurrency': 4\} fits", 600)
            assert not runs.joinpath(run.run_id).exists()  # planning started nothing

            say(terminal, "start it", "start_run")
            started = confirm(terminal, r"eyas run --samples 16 --max-tokens 48 --max-seq-len 256", 120)
            assert f"started run {run.run_id} in the background" in started
            wait_for(lambda: pending_kind(run) == "approval data", timeout=900, interval=1, what="the data gate")
            assert read_run(run).state["sizes"]["samples"] == 16  # the edited size, not the first plan's

            say(terminal, "approve the data gate", "answer_gate")
            assert "approve recorded" in confirm(terminal, r"approve the pending gate", 120)
            output = production_target.workdir / "runs" / run.run_id / "data" / "conversations.jsonl"
            wait_for(lambda: output.exists() and len(output.read_text().splitlines()) >= 3, timeout=600, interval=0.5)
            pid = int((job_dir(production_target, run.run_id, "generate") / "pid").read_text())
            os.killpg(pid, signal.SIGKILL)  # as an OOM kill looks: the whole group, no exit code
            wait_for(lambda: pending_kind(run) == "failure data", timeout=600, interval=1, what="the failure gate")

            say(terminal, "retry", "answer_gate")
            assert "retry recorded" in confirm(terminal, r"retry the pending gate", 120)
            wait_for(lambda: pending_kind(run) == "approval extract", timeout=900, interval=1, what="the next gate")
            ids = conversation_ids(production_target, run.run_id)
            assert len(ids) == len(set(ids)) == 16

            say(terminal, "deploy the drafter", "deploy_drafter")
            spec = json.dumps(
                {"method": "eagle3", "model": NO_DRAFTER, "num_speculative_tokens": 3}, separators=(",", ":")
            )
            deployed = confirm(
                terminal, rf"command line before: .*\n    after: .*--speculative-config '{re.escape(spec)}'", 900
            )
            assert f"eyas deploy for run {run.run_id}: rolled back" in deployed
            terminal.expect(r"you> ", 60)
            terminal.send("exit")
            assert terminal.proc.wait(timeout=60) == 0
        finally:
            terminal.close()

    # The deploy (the same `eyas deploy` an operator types) was rolled back to production's exact old argv (/proc).
    assert stat.S_IMODE((run.root / "deploy.json").stat().st_mode) == 0o600
    result = json.loads((run.root / "deploy.json").read_text())
    assert result["kept"] is False and "did not come up with the drafter" in result["reason"]
    report = run.report.read_text()
    assert "## Deploy" in report and "**Drafter rolled back:** production did not come up" in report
    assert "--speculative-config" in report  # the exact change that was tried
    assert result["argv_deployed"] == [*argv_before, "--speculative-config", spec]
    assert not Path(service(production_target).drop_in_path()).exists()
    assert service(production_target).health().status is Status.OK
    assert server_argv(production_target) == argv_before
    decisions = [(d["action"], d["who"]) for d in read_run(run).state["decisions"]]
    assert ("approve", "operator (chat)") in decisions and ("retry", "operator (chat)") in decisions
    # The chat itself replays offline, the pipeline's answers as the controls recorded them.
    report, _ = replay(runs / chat_id / "transcript.jsonl")
    assert report.ok, report

    # The generation jobs read the key from a file only their owner reads, and nothing
    # else eyas wrote (the runs' folders, the run's data and jobs on the host) or printed holds it.
    jobs = production_target.workdir / "jobs"
    keyed = holding(
        PRODUCTION_KEY, runs, production_target.workdir / "runs" / run.run_id, *jobs.glob(f"{run.run_id}.*")
    )
    generations = sorted(jobs.glob(f"{run.run_id}.generate*/secrets.env"))
    assert generations and sorted(keyed) == generations, keyed
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in generations)
    assert PRODUCTION_KEY not in terminal.output
