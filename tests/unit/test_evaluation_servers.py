"""The evaluation servers a gate and the dry run show are the servers the evaluate job starts. eyas builds their
argv (graph/phases/evaluate/jobs.server_argvs) from the job's request; evaluate.py builds its own from the job's
flags, in code eyas cannot import (it runs in the target's venv). Here evaluate.py's own code runs on the job's
argv, with its vLLM servers replaced by a recorder, and the two must agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from eyas.graph.context import RunContext
from eyas.graph.gates.production import phase_servers
from eyas.graph.phases.evaluate import node as evaluate_node
from eyas.graph.phases.evaluate.jobs import EVALUATE_PORT, EvaluateRequest, evaluate_job, evaluate_sizes, server_argvs
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.checks.server_flags import EVALUATE_OWN
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import evaluate

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
KIMI = parse_unit_file((FIXTURES / "vllm_kimi.service").read_text())
CPU_FLAGS = ["--dtype", "float32", "--enforce-eager"]  # what evaluate.cpu_server_args gives without CUDA


def started_servers(monkeypatch: pytest.MonkeyPatch, job_argv: list[str], cpu_flags: list[str]) -> dict[str, Any]:
    """The argv of each server evaluate.py starts, by name and in order, when run as `job_argv` on a host whose
    vLLM needs `cpu_flags`. The job's interpreter must be this one: evaluate.py starts its servers with it."""
    assert job_argv[0] == sys.executable and Path(job_argv[1]).name == "evaluate.py"
    started: dict[str, list[str]] = {}

    class Recorder:
        def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, **_: Any) -> None:
            started[log_path.stem] = argv  # evaluate.py names each server's log after it
            self.pid, self.base_url = None, "http://127.0.0.1:9"

        def start(self) -> None:
            pass

        def wait_ready(self) -> None:
            pass

        def stop(self) -> None:
            pass

    monkeypatch.setattr(evaluate, "VllmServer", Recorder)
    monkeypatch.setattr(evaluate, "cpu_server_args", lambda: list(cpu_flags))
    monkeypatch.setattr(evaluate, "run_prompts", lambda *_, **__: {})
    monkeypatch.setattr(evaluate, "measure_speculative", lambda *_, **__: {})
    evaluate.measure(evaluate.parse_args(job_argv[2:]), [])
    return started


def files_on_this_machine(request: EvaluateRequest) -> None:
    """What evaluate.py checks before it starts a server: the held-out prompts and the drafter's config."""
    Path(request.prompts).parent.mkdir(parents=True, exist_ok=True)
    Path(request.prompts).write_text(json.dumps({"prompt": "Say hi."}) + "\n")
    Path(request.drafter_dir).mkdir(parents=True, exist_ok=True)
    Path(request.drafter_dir, "config.json").write_text("{}")


@pytest.mark.parametrize("cpu", [False, True], ids=["cuda", "cpu"])
@pytest.mark.parametrize("acceptance_only", [False, True], ids=["with-baseline", "acceptance-only"])
def test_server_argvs_are_what_evaluate_py_starts_from_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu: bool, acceptance_only: bool
) -> None:
    root = tmp_path.resolve()  # evaluate.py names the drafter by its resolved path
    host = HostConfig(address=LOCAL, python=sys.executable, workdir=str(root))
    request = EvaluateRequest(
        model_dir="/data/models/Kimi-K2-Instruct", drafter_dir=str(root / "run" / "drafter"),
        prompts=str(root / "run" / "held_out.jsonl"), out=str(root / "run" / "evaluation.json"),
        **(evaluate_sizes(DEFAULT_SIZES) | {"k": [1, 3]}), acceptance_only=acceptance_only,
        vllm_args=["--dtype", "float16", "--max-num-seqs", "4"], launch=inherit_launch(KIMI, EVALUATE_OWN),
    )  # fmt: skip
    files_on_this_machine(request)
    cpu_flags = CPU_FLAGS if cpu else []
    started = started_servers(monkeypatch, evaluate_job("r.evaluate", host, str(root), request).argv, cpu_flags)
    shown = server_argvs(sys.executable, request, cpu_flags)
    assert list(started.items()) == list(shown.items())
    assert list(shown) == [*([] if acceptance_only else ["baseline"]), "speculative-k1", "speculative-k3"]
    assert all(argv[argv.index("--port") + 1] == str(EVALUATE_PORT) for argv in shown.values())


def context(tmp_path: Path) -> RunContext:
    """The motivating Kimi service on this machine (as tests/unit/test_gate_production.py has it)."""
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path.resolve()))},
        target=TargetConfig(
            base_url="http://127.0.0.1:9", model="kimi-k2", model_dir="/data/models/Kimi-K2-Instruct",
            unit="vllm.service", unit_file=str(FIXTURES / "vllm_kimi.service"),
        ),
    )  # fmt: skip
    run = RunDir(tmp_path / "r")
    return RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run)


def test_the_training_gate_shows_the_servers_the_evaluate_phase_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's view and the launched job each come from the phase's own code; evaluate.py is the judge."""
    ctx = context(tmp_path)
    state: RunState = {"sizes": DEFAULT_SIZES.model_dump(), "gpus": {"count": 8}, "plan": {}}
    (job,) = evaluate_node.build_jobs(ctx, state)
    files_on_this_machine(
        EvaluateRequest(
            model_dir=ctx.model_dir, drafter_dir=ctx.artifact("drafter"), prompts=ctx.artifact("held_out"),
            out=ctx.artifact("evaluation"), **evaluate_sizes(DEFAULT_SIZES),
        )
    )  # fmt: skip
    view = phase_servers("evaluate", ctx, state)
    assert view is not None
    assert list(started_servers(monkeypatch, job.argv, []).items()) == list(view["servers"].items())
    assert list(view["servers"]) == ["baseline", f"speculative-k{DEFAULT_SIZES.num_speculative_tokens}"]
