"""The evaluation servers a gate and the dry run show are the servers the evaluate job starts. eyas builds their
argv (graph/phases/evaluate/jobs.server_argvs) from the job's request; evaluate.py builds its own from the job's
flags, in code eyas cannot import (it runs in the target's venv). Here evaluate.py's own code runs on the job's
argv, with its vLLM servers replaced by a recorder, and the two must agree."""

from __future__ import annotations

import json
import signal
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

import eval_servers
import evaluate

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
KIMI = parse_unit_file((FIXTURES / "vllm_kimi.service").read_text())
CPU_FLAGS = ["--dtype", "float32", "--enforce-eager"]  # what eval_servers.cpu_server_args gives without CUDA


def started_servers(
    monkeypatch: pytest.MonkeyPatch, job_argv: list[str], cpu_flags: list[str], *, together: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """The argv of each server evaluate.py starts, by name and in order, when run as `job_argv` on a host whose
    vLLM needs `cpu_flags` and (`together`) has the memory to start them side by side; and what happened, in order
    (start, ready, measure, vLLM's benchmark, stop per server). The job's interpreter must be this one: evaluate.py
    starts its servers with it. Stand-in: the servers (what each would run is the point, not a vLLM start)."""
    assert job_argv[0] == sys.executable and Path(job_argv[1]).name == "evaluate.py"
    started: dict[str, list[str]] = {}
    steps: list[str] = []

    class Recorder:
        def __init__(self, argv: list[str], env: dict[str, str], log_path: Path, **_: Any) -> None:
            self.name = log_path.stem  # evaluate.py names each server's log after it
            started[self.name] = self.argv = argv
            self.pid, self.base_url, self.log_path = None, f"http://127.0.0.1:9/{self.name}", log_path

        def start(self) -> None:
            steps.append(f"start {self.name}")

        def wait_ready(self) -> None:
            steps.append(f"ready {self.name}")

        def signal_group(self, sig: int) -> bool:  # stop_all's steps: the first signal is the stop
            if sig == signal.SIGTERM:
                steps.append(f"stop {self.name}")
            return False

        def reap(self) -> None:
            pass

        def stop(self) -> None:
            self.signal_group(signal.SIGTERM)

    class Run:  # a server's run: its name is the server's, and it asks nothing
        def __init__(self, name: str, base_url: str, max_tokens: int) -> None:
            assert base_url.endswith(f"/{name}")
            self.name = name

        def result(self) -> dict[str, Any]:
            return {}

    def in_turn(run: Run, *_: Any) -> dict[str, Any]:
        steps.append(f"measure {run.name}")
        return {}

    def interleaved(runs: list[Run], *_: Any) -> None:
        steps.append("interleave " + " ".join(run.name for run in runs))

    monkeypatch.setattr(eval_servers, "VllmServer", Recorder)
    monkeypatch.setattr(eval_servers, "cpu_server_args", lambda: list(cpu_flags))
    monkeypatch.setattr(eval_servers, "side_by_side", lambda *_: together)
    monkeypatch.setattr(evaluate, "ServerRun", Run)
    monkeypatch.setattr(evaluate, "measure_in_turn", in_turn)
    monkeypatch.setattr(evaluate, "measure_interleaved", interleaved)
    monkeypatch.setattr(evaluate, "speculative_result", lambda *_: {})
    evaluate.measure(evaluate.parse_args(job_argv[2:]), [], lambda name, url: steps.append(f"bench {name}"))
    return started, steps


def lifecycle(server: str) -> tuple[str, ...]:
    """What evaluate.py does with a server, in order: n-gram's too is benched (the deploy weighs it at both
    concurrencies)."""
    return ("start", "ready", "measure", "bench", "stop")


def files_on_this_machine(request: EvaluateRequest) -> None:
    """What evaluate.py checks before it starts a server: the held-out prompts and the drafter's config."""
    Path(request.prompts).parent.mkdir(parents=True, exist_ok=True)
    Path(request.prompts).write_text(json.dumps({"prompt": "Say hi."}) + "\n")
    Path(request.drafter_dir).mkdir(parents=True, exist_ok=True)
    Path(request.drafter_dir, "config.json").write_text("{}")


@pytest.mark.parametrize("cpu", [False, True], ids=["cuda", "cpu"])
@pytest.mark.parametrize("acceptance_only", [False, True], ids=["with-baseline", "acceptance-only"])
@pytest.mark.parametrize("ngram", [True, False], ids=["with-ngram", "no-ngram"])
def test_server_argvs_are_what_evaluate_py_starts_from_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu: bool, acceptance_only: bool, ngram: bool
) -> None:
    root = tmp_path.resolve()  # evaluate.py names the drafter by its resolved path
    host = HostConfig(address=LOCAL, python=sys.executable, workdir=str(root))
    request = EvaluateRequest(
        model_dir="/data/models/Kimi-K2-Instruct", drafter_dir=str(root / "run" / "drafter"),
        prompts=str(root / "run" / "held_out.jsonl"), out=str(root / "run" / "evaluation.json"),
        **(evaluate_sizes(DEFAULT_SIZES) | {"k": [1, 3], "ngram": ngram}), acceptance_only=acceptance_only,
        vllm_args=["--dtype", "float16", "--max-num-seqs", "4"], launch=inherit_launch(KIMI, EVALUATE_OWN),
    )  # fmt: skip
    files_on_this_machine(request)
    cpu_flags = CPU_FLAGS if cpu else []
    started, steps = started_servers(monkeypatch, evaluate_job("r.evaluate", host, str(root), request).argv, cpu_flags)
    shown = server_argvs(sys.executable, request, cpu_flags)
    assert list(started.items()) == list(shown.items())
    per_k = [[f"speculative-k{k}", *([f"ngram-k{k}"] if ngram else [])] for k in (1, 3)]
    assert list(shown) == [*([] if acceptance_only else ["baseline"]), *per_k[0], *per_k[1]]
    # n-gram speculation at each k on the same flags as the drafter's server: only the speculative config differs.
    for k in (1, 3) if ngram else ():
        drafter, lookup = shown[f"speculative-k{k}"], shown[f"ngram-k{k}"]
        at = drafter.index("--speculative-config") + 1
        assert drafter[:at] == lookup[:at] and drafter[at + 1 :] == lookup[at + 1 :]
        assert json.loads(lookup[at]) == evaluate.ngram_config(k)
    assert all(argv[argv.index("--port") + 1] == str(EVALUATE_PORT) for argv in shown.values())
    # In turn: each server starts after the one before has been measured, benched while it is up, and stopped.
    assert steps == [f"{step} {name}" for name in shown for step in lifecycle(name)]


def test_side_by_side_servers_all_start_first_then_are_measured_interleaved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without CUDA and with the memory for all, every server starts and is ready before the first measurement (two
    cores start two at once; no start takes cores from a measurement), each on its own port; then all are measured
    together, interleaved, each benched after that, and all are stopped at the end."""
    root = tmp_path.resolve()
    host = HostConfig(address=LOCAL, python=sys.executable, workdir=str(root))
    request = EvaluateRequest(
        model_dir=str(root / "model"), drafter_dir=str(root / "run" / "drafter"), prompts=str(root / "run" / "p.jsonl"),
        out=str(root / "run" / "evaluation.json"), **(evaluate_sizes(DEFAULT_SIZES) | {"k": [1, 3]}),
    )  # fmt: skip
    files_on_this_machine(request)
    job = evaluate_job("r.evaluate", host, str(root), request)
    started, steps = started_servers(monkeypatch, job.argv, CPU_FLAGS, together=True)
    names = ["baseline", "speculative-k1", "ngram-k1", "speculative-k3", "ngram-k3"]
    assert list(started) == names
    assert [argv[argv.index("--port") + 1] for argv in started.values()] == [str(EVALUATE_PORT + n) for n in range(5)]
    starts, readies = [f"start {name}" for name in names], [f"ready {name}" for name in names]
    benches = [f"bench {name}" for name in names]
    assert steps == [*starts, *readies, "interleave " + " ".join(names), *benches, *(f"stop {n}" for n in names)]


def test_side_by_side_needs_no_cuda_and_the_memory_for_every_server(tmp_path: Path) -> None:
    """Three servers of a 1 GB model with a 2 GiB cache each: about 4.5 GiB apiece, 13.5 GiB with what is kept
    free; 16 GiB available holds them, 8 GiB holds two only."""
    model = tmp_path / "model"
    model.mkdir()
    with (model / "model.safetensors").open("wb") as weights:
        weights.truncate(500 * 1024**2)
    env = {"VLLM_CPU_KVCACHE_SPACE": "2"}
    each = eval_servers.server_bytes(model, None, env)
    assert each == 2 * 1024**3 + 2 * 500 * 1024**2 + eval_servers.RUNTIME_BYTES
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   8388608 kB\n")
    assert eval_servers.available_bytes(meminfo) == 8 * 1024**3
    assert not eval_servers.available_bytes(tmp_path / "absent")
    room = 3 * each + eval_servers.KEEP_FREE_BYTES
    assert eval_servers.fits_side_by_side(3, each, room) and not eval_servers.fits_side_by_side(3, each, room - 1)
    assert not eval_servers.fits_side_by_side(1, each, 10 * room)  # one server has nothing to start beside


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
    assert list(started_servers(monkeypatch, job.argv, [])[0].items()) == list(view["servers"].items())
    k = DEFAULT_SIZES.num_speculative_tokens
    below = [name for lower in range(1, k) for name in (f"speculative-k{lower}", f"ngram-k{lower}")]
    assert list(view["servers"]) == ["baseline", f"speculative-k{k}", f"ngram-k{k}", *below]
