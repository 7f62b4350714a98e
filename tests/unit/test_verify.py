"""State verification on this machine, with stand-ins only for what cannot run here (named per test)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import threading
from pathlib import Path

import pytest

from eyas.tools.checks.binaries import check_binaries
from eyas.tools.checks.disk import check_disk
from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.health import check_health
from eyas.tools.checks.packages import check_packages
from eyas.tools.checks.result import CheckContext, CheckResult, Status
from eyas.tools.checks.service import check_service
from eyas.tools.checks.verify import verify
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.measure import runs_remote_code
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from stub_http import completion_body, models_body, stub_server

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
MODEL = "SmolLM2-135M-Instruct"


def context(tmp_path: Path, base_url: str = "http://127.0.0.1:9", **overrides: object) -> CheckContext:
    python = overrides.pop("python", sys.executable)
    target = TargetConfig(base_url=base_url, model=MODEL, generation_deadline_s=5, **overrides)  # type: ignore[arg-type]
    return CheckContext(
        host=LocalHost(),
        host_config=HostConfig(address="local", python=str(python), workdir=str(tmp_path)),
        target=target,
        http=HttpClient(),
        data_path=str(tmp_path),
    )


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- health: each tier catches its own kind of broken server -------------------------------------------------


def test_nothing_listening_fails_at_the_tcp_tier(tmp_path: Path) -> None:
    result = check_health(context(tmp_path, "http://127.0.0.1:9"))
    assert result.status is Status.FAIL and result.facts["failed_tier"] == "tcp"
    assert "is the server running?" in result.message


def test_unhealthy_engine_fails_at_health(tmp_path: Path) -> None:
    with stub_server({"GET /health": (503, "")}) as url:
        result = check_health(context(tmp_path, url))
    assert result.facts["failed_tier"] == "health" and "HTTP 503" in result.message


def test_wrong_model_is_named(tmp_path: Path) -> None:
    with stub_server({"GET /health": (200, ""), "GET /v1/models": (200, models_body("other-model"))}) as url:
        result = check_health(context(tmp_path, url))
    assert result.facts["failed_tier"] == "models"
    assert "['other-model'], not 'SmolLM2-135M-Instruct'" in result.message and "target.model" in result.message


def test_listing_without_generation_is_a_failure(tmp_path: Path) -> None:
    """The classic trap: /v1/models answers while generation is broken."""
    routes = {
        "GET /health": (200, ""),
        "GET /v1/models": (200, models_body(MODEL)),
        "POST /v1/chat/completions": (500, '{"error": {"message": "EngineCore died"}}'),
    }
    with stub_server(routes) as url:
        result = check_health(context(tmp_path, url))
    assert result.status is Status.FAIL and result.facts["failed_tier"] == "generation"
    assert "lists the model but does not generate" in result.message and "EngineCore died" in result.message


def test_garbage_answers_are_a_protocol_failure(tmp_path: Path) -> None:
    with stub_server({"GET /health": (200, ""), "GET /v1/models": (200, "<html>proxy login</html>")}) as url:
        result = check_health(context(tmp_path, url))
    assert result.facts["failed_tier"] == "protocol"
    assert "not the OpenAI API" in result.message and "proxy login" in result.message


def test_generating_server_with_unreadable_metrics_is_a_warning(tmp_path: Path) -> None:
    routes = {
        "GET /health": (200, ""),
        "GET /v1/models": (200, models_body(MODEL)),
        "POST /v1/chat/completions": (200, completion_body("Four.", 3)),
        "GET /metrics": (200, "this is { not prometheus"),
    }
    with stub_server(routes) as url:
        result = check_health(context(tmp_path, url))
    assert result.status is Status.WARN and "/metrics unreadable" in result.message
    assert result.facts["generation"]["text"] == "Four."


def test_metrics_are_summarised(tmp_path: Path) -> None:
    routes = {
        "GET /health": (200, ""),
        "GET /v1/models": (200, models_body(MODEL)),
        "POST /v1/chat/completions": (200, completion_body("Four.", 3)),
        "GET /metrics": (200, (FIXTURES / "vllm_metrics.txt").read_text()),
    }
    with stub_server(routes) as url:
        result = check_health(context(tmp_path, url))
    assert result.status is Status.OK, result.message
    assert result.facts["metrics"]["spec_decode"]["num_drafts"] > 0
    assert "speculative decoding counters present" in result.message


# -- gpus: nvidia-smi is a stand-in script printing real 8-GPU output (no GPU exists here) -------------------


def fake_nvidia_smi(bin_dir: Path, csv: str, topo: str, rc: int = 0) -> None:
    executable(
        bin_dir / "nvidia-smi",
        f"""#!/bin/sh
case "$1" in
  topo) cat {topo} ;;
  *) cat {csv}; exit {rc} ;;
esac
""",
    )


def test_gpus_parsed_from_an_8_gpu_pcie_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvidia_smi(tmp_path / "bin", FIXTURES / "nvidia_smi_8gpu_pcie.csv", FIXTURES / "nvidia_smi_topo_pcie.txt")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = check_gpus(context(tmp_path))
    # This stand-in answers only the GPU and topology queries: 89% of memory held by processes it cannot name is
    # a warning (tests/unit/test_gpu_holders.py has the stand-in that names them).
    assert result.status is Status.WARN and "which processes hold the GPUs is unknown" in result.message
    assert result.facts["count"] == 8 and result.facts["interconnect"] == "pcie"
    assert [gpu["index"] for gpu in result.facts["gpus"]] == list(range(8))
    assert "interconnect pcie" in result.message


def test_broken_driver_is_a_failure_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.txt"
    broken.write_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    fake_nvidia_smi(tmp_path / "bin", broken, broken, rc=9)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = check_gpus(context(tmp_path))
    assert result.status is Status.FAIL and "couldn't communicate with the NVIDIA driver" in result.message


def test_host_without_nvidia_smi_reports_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    result = check_gpus(context(tmp_path))
    assert result.status is Status.WARN and result.message.startswith("no GPU") and result.facts["count"] == 0


# -- disk, binaries, packages: real commands on this machine -------------------------------------------------


def test_disk_measures_the_data_folder(tmp_path: Path) -> None:
    result = check_disk(context(tmp_path))
    usage = shutil.disk_usage(tmp_path)
    assert result.status is not Status.FAIL and result.facts["path"] == str(tmp_path)
    assert result.facts["total_bytes"] == usage.total
    assert abs(result.facts["free_bytes"] - usage.free) < 0.01 * usage.total


def test_a_data_folder_that_cannot_hold_the_data_fails_and_is_never_measured_at_a_parent(tmp_path: Path) -> None:
    """`workdir = "/dat/eyas"` (a typo) would otherwise report the free space of `/`, another volume."""
    (tmp_path / "a-file").write_text("")
    cases = {Path("/dat-eyas-not-mounted/eyas"): "does not exist", tmp_path / "a-file": "is not a folder"}
    if os.geteuid() != 0:  # root writes everywhere: the read-only case needs an ordinary user
        (tmp_path / "read-only").mkdir(mode=0o555)
        cases[tmp_path / "read-only"] = "is not writable"
    for folder, problem in cases.items():
        ctx = context(tmp_path)
        ctx.data_path = str(folder)
        result = check_disk(ctx)
        assert result.status is Status.FAIL and "free_bytes" not in result.facts, result
        assert result.message.startswith(f"The data folder {folder} {problem} on ")
        assert f"`mkdir -p {folder}`" in result.message and "workdir" in result.message
        assert "--data-path" in result.message and "\n" not in result.message
    # Not there yet, under a folder that is: measured on the volume eyas creates it on, and said.
    ctx = context(tmp_path)
    ctx.data_path = str(tmp_path / "dat" / "eyas")
    result = check_disk(ctx)
    assert result.status is not Status.FAIL and result.facts["measured_at"] == str(tmp_path), result
    assert f"it does not exist yet, and eyas creates it on that volume (the one of {tmp_path})" in result.message


def test_path_trap_flags_a_tool_only_in_the_venv(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    executable(venv_bin / "mytool", "#!/bin/sh\necho mytool\n")
    (venv_bin / "python").symlink_to(sys.executable)
    ctx = context(tmp_path, python=venv_bin / "python")
    ctx.binaries = ["mytool", "sh", "surely-not-a-tool"]
    result = check_binaries(ctx)
    assert result.status is Status.WARN and result.facts["only_in_venv"] == ["mytool"]
    assert "only in the venv, not on PATH: mytool" in result.message
    tools = result.facts["tools"]
    assert tools["mytool"] == {"on_path": None, "in_venv": str(venv_bin / "mytool")}
    assert tools["sh"]["on_path"] == shutil.which("sh", path=os.environ["PATH"])
    assert tools["surely-not-a-tool"] == {"on_path": None, "in_venv": None}


def test_tools_found_nowhere_are_named_not_counted(tmp_path: Path) -> None:
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    ctx = context(tmp_path, python=tmp_path / "venv" / "bin" / "python")
    ctx.binaries = ["surely-not-a-tool", "nor-this-one"]
    assert check_binaries(ctx).message == "none of surely-not-a-tool, nor-this-one is on PATH or in the venv"
    ctx.binaries = ["sh", "nor-this-one"]
    assert check_binaries(ctx).message == "found: sh; absent: nor-this-one"


def test_missing_interpreter_fails_with_the_field_to_fix(tmp_path: Path) -> None:
    result = check_binaries(context(tmp_path, python=tmp_path / "no" / "python"))
    assert result.status is Status.FAIL and "hosts.*.python" in result.message


def test_packages_missing_from_an_interpreter_are_listed(tmp_path: Path) -> None:
    """The control plane's own interpreter has none of the ML packages: a warning that names them."""
    result = check_packages(context(tmp_path))
    assert result.status is Status.WARN
    assert result.facts["vllm"] is None and result.facts["python"] == sys.version.split()[0]
    assert "not installed: vllm, speculators" in result.message and not result.message.startswith(";")


def interpreter(tmp_path: Path, name: str, site: Path | None = None) -> Path:
    """This machine's Python without its site-packages (-S): nothing installed but what `site` holds."""
    path = f"PYTHONPATH={site} " if site else ""
    return executable(tmp_path / name / "bin" / "python", f'#!/bin/sh\n{path}exec {sys.executable} -S "$@"\n')


def test_a_hub_drafter_needs_huggingface_hub_in_the_host_python(tmp_path: Path) -> None:
    bare = interpreter(tmp_path, "bare")
    ctx = context(tmp_path, python=bare)
    ctx.drafter_base = "org/some-drafter"
    result = check_packages(ctx)
    assert result.status is Status.FAIL and "huggingface_hub" in result.message and "org/some-drafter" in result.message
    assert f"`{bare} -m pip install huggingface_hub`" in result.message

    ctx.drafter_base = "/data/drafter"  # a directory on the host: nothing to download, nothing more to install
    assert check_packages(ctx).status is Status.WARN and "huggingface_hub" not in check_packages(ctx).message

    site = tmp_path / "site"  # an installed huggingface_hub as importlib.metadata finds one: its dist-info
    (site / "huggingface_hub-2.5.0.dist-info").mkdir(parents=True)
    (site / "huggingface_hub-2.5.0.dist-info" / "METADATA").write_text("Name: huggingface_hub\nVersion: 2.5.0\n")
    ctx = context(tmp_path, python=interpreter(tmp_path, "with-hub", site))
    ctx.drafter_base = "org/some-drafter"
    result = check_packages(ctx)
    assert result.status is Status.WARN and "huggingface_hub 2.5.0" in result.message
    assert result.facts["huggingface_hub"] == "2.5.0"


# -- service: read from the given unit file, never a guessed path --------------------------------------------


def test_service_parsed_from_a_unit_file(tmp_path: Path) -> None:
    ctx = context(tmp_path, unit_file=str(FIXTURES / "vllm_kimi.service"))
    result = check_service(ctx)
    assert result.facts["source"] == "file" and result.facts["vllm"]["tensor_parallel_size"] == 8
    assert any(name.startswith("NCCL_") for name in result.facts["environment"])
    # The fixture serves Kimi on its own port; the config here names SmolLM2 on port 9, so both are flagged.
    assert result.status is Status.WARN and "but target.model is 'SmolLM2-135M-Instruct'" in result.message


def test_the_speed_probe_runs_remote_code_as_the_unit_says_unless_the_run_decided(tmp_path: Path) -> None:
    """The speed probe loads the target as the jobs will: the run's choice (verify's) when it made one, else the
    config's, else production's unit, which for Kimi passes --trust-remote-code (the config says nothing here)."""
    ctx = context(tmp_path, unit_file=str(FIXTURES / "vllm_kimi.service"))
    config = EyasConfig(hosts={LOCAL: ctx.host_config}, target=ctx.target)
    figures = Figures(samples=10, max_tokens=16)
    assert runs_remote_code(ctx, config, figures) is True
    assert runs_remote_code(ctx, config, figures.model_copy(update={"trust_remote_code": False})) is False
    said = config.model_copy(update={"target": ctx.target.model_copy(update={"trust_remote_code": False})})
    assert runs_remote_code(ctx, said, figures) is False


def test_missing_unit_file_names_the_setting(tmp_path: Path) -> None:
    result = check_service(context(tmp_path, unit_file=str(tmp_path / "vllm.service")))
    assert result.status is Status.FAIL and "does not exist" in result.message and "--unit-file" in result.message


def test_no_unit_configured_is_not_guessed(tmp_path: Path) -> None:
    result = check_service(context(tmp_path))
    assert result.status is Status.WARN and "eyas does not guess paths" in result.message


# -- verify: all checks at once ------------------------------------------------------------------------------


def test_checks_run_concurrently(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check waits at a barrier that opens only when all of them are in flight: no timing involved."""
    names = ["health", "service", "gpus", "disk", "binaries", "packages"]
    barrier = threading.Barrier(len(names), timeout=20)

    def waiting(name: str):  # type: ignore[no-untyped-def]
        def check(ctx: CheckContext) -> CheckResult:
            barrier.wait()
            return CheckResult(name=name, status=Status.OK, message="met the others")

        return check

    monkeypatch.setattr("eyas.tools.checks.verify.CHECKS", {name: waiting(name) for name in names})
    report = verify(context(tmp_path))
    assert [result.name for result in report.results] == names
    assert report.worst is Status.OK


def test_a_check_that_cannot_reach_its_host_is_reported_not_raised(tmp_path: Path) -> None:
    from eyas.tools.errors import HostUnreachable

    class DeadHost(LocalHost):
        def run(self, command: str, *, timeout: float = 60.0):  # type: ignore[no-untyped-def]
            raise HostUnreachable("Cannot reach host 'gpu' at 10.0.0.1:22 within 10 s (timed out).")

    ctx = context(tmp_path)
    ctx.host = DeadHost()
    report = verify(ctx, ["disk", "packages"])
    assert report.worst is Status.FAIL
    assert all("Cannot reach host 'gpu'" in result.message for result in report.results)


# -- a check that breaks on what it reads is that check's failure, never the report's ------------------------

# A host interpreter's answers to the version probe that are not the JSON object it should print.
NOT_JSON_ANSWERS = {
    "prints nothing": "exit 0",
    "prints a warning only": "echo 'Could not find platform independent libraries <prefix>'",
    "prints a JSON list": "echo '[1, 2]'",
    "prints JSON null": "echo null",
    "prints half a JSON object": 'echo \'{"python": "3.11\'',
}


@pytest.mark.parametrize("script", NOT_JSON_ANSWERS.values(), ids=NOT_JSON_ANSWERS.keys())
def test_a_python_that_answers_no_json_fails_the_packages_check(tmp_path: Path, script: str) -> None:
    python = executable(tmp_path / "venv" / "bin" / "python", f"#!/bin/sh\n{script}\n")
    report = verify(context(tmp_path, python=python), ["packages", "disk"])
    packages = report.result("packages")
    assert packages.status is Status.FAIL and "not a JSON object of versions" in packages.message
    assert str(python) in packages.message
    assert "free of" in report.result("disk").message


def test_a_check_that_crashes_is_its_own_failure_and_the_others_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `df` that prints lines the disk check cannot read: the disk check fails with the error it met."""
    executable(tmp_path / "bin" / "df", "#!/bin/sh\necho Filesystem; echo one; echo two three four\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    report = verify(context(tmp_path), ["disk", "packages", "binaries"])
    disk = report.result("disk")
    assert disk.status is Status.FAIL and "ValueError" in disk.message and "'three'" in disk.message
    assert report.result("packages").status is Status.WARN
    assert report.result("binaries").status is not Status.FAIL
