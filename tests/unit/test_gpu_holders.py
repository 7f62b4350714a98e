"""The gpus check names who holds the GPUs: on an 8-GPU host where production holds 93% of every GPU it says
so, never a plain "ok". nvidia-smi is a stand-in (tests/support/nvidia_smi_standin.py: no GPU here); the production
server is a real process tree started from a unit file's ExecStart, found as the stand-in for systemd finds it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.tools.checks.gpus import check_gpus
from eyas.tools.checks.nvidia_smi import parse_compute_apps, parse_gpu_uuids
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import HostConfig, TargetConfig
from nvidia_smi_standin import install_nvidia_smi

# The production "server": a main process whose child holds the GPUs, as vLLM's engine workers do.
CHILD = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(600)'])"


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.fixture
def production(tmp_path: Path) -> Iterator[tuple[Path, int, int]]:
    """(unit file, main pid, the child's pid): a real process tree started from the unit's ExecStart."""
    argv = [sys.executable, "-c", CHILD]
    unit = tmp_path / "vllm.service"
    unit.write_text(f"[Service]\nExecStart={shlex.join(argv)}\n")
    process = subprocess.Popen(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not children(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the child to exist, not a timed sync
        (child,) = children(process.pid)
        yield unit, process.pid, child
    finally:
        os.killpg(process.pid, 9)
        process.wait()


def context(tmp_path: Path, unit_file: Path) -> CheckContext:
    return CheckContext(
        host=LocalHost(),
        host_config=HostConfig(address="local", python=sys.executable, workdir=str(tmp_path)),
        target=TargetConfig(base_url="http://127.0.0.1:9", model="kimi-k2", unit_file=str(unit_file)),
        http=HttpClient(),
        data_path=str(tmp_path),
    )


def test_production_holding_93_percent_of_every_gpu_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, production: tuple[Path, int, int]
) -> None:
    unit, main_pid, child = production
    install_nvidia_smi(tmp_path / "bin", holder_pid=child)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = check_gpus(context(tmp_path, unit))
    assert result.status is Status.WARN, result.message
    assert f"production (pid {main_pid}) holds 8 of 8 GPUs (93% of their memory)" in result.message
    assert result.facts["production"]["gpus"] == list(range(8))
    assert result.facts["production"]["main_pid"] == main_pid and child in result.facts["production"]["pids"]
    for gpu in result.facts["gpus"]:
        assert gpu["production"] and gpu["memory_free_mib"] in (5709, 5707)
        assert gpu["processes"] == [
            {"pid": child, "name": "/srv/vllm/.venv/bin/python3", "used_mib": gpu["processes"][0]["used_mib"],
             "gpu_uuid": gpu["processes"][0]["gpu_uuid"], "production": True}
        ]  # fmt: skip


def test_gpus_held_by_another_process_are_named_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, production: tuple[Path, int, int]
) -> None:
    unit, _, _ = production
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())  # this test, not production
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    result = check_gpus(context(tmp_path, unit))
    assert result.status is Status.WARN
    assert "production" not in result.message and "production" in result.facts
    assert result.facts["production"]["gpus"] == []
    assert f"GPU 0 has 5709 MiB free, held by pid {os.getpid()} /srv/vllm/.venv/bin/python3" in result.message


def test_compute_apps_csv_in_every_shape_nvidia_smi_prints() -> None:
    text = "4242, /usr/bin/python3, 75846, GPU-0f1c\n\n77, /opt/odd, name/python, [N/A], GPU-1f1c\n"
    first, second = parse_compute_apps(text)
    assert (first.pid, first.name, first.used_mib, first.gpu_uuid) == (4242, "/usr/bin/python3", 75846, "GPU-0f1c")
    assert (second.name, second.used_mib) == ("/opt/odd, name/python", None)
    assert parse_compute_apps("") == [] and parse_compute_apps("No running processes found\n") == []
    with pytest.raises(ValueError, match=r"line 1 is not nvidia-smi compute-apps CSV .*pid,process_name"):
        parse_compute_apps("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert parse_gpu_uuids("0, GPU-aa\n1, MIG-bb\n") == {"GPU-aa": 0, "MIG-bb": 1}
    with pytest.raises(ValueError, match="not 'index, uuid'"):
        parse_gpu_uuids("0, NVIDIA H100 PCIe, 81559, 75850, 95\n")
