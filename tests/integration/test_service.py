"""The Service interface. systemd cannot run here (no systemd as PID 1), so the systemctl-backed class is checked
against a STAND-IN `systemctl` script for the exact argv it passes; the stand-in Service (a unit file run as a
detached job, tools/service/standin.py) is checked for real against an embedded target of this module's own."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from eyas.tools.checks.result import CheckResult, Status
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.local import LocalHost
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.service.base import ServiceError
from eyas.tools.service.systemd import SystemdService
from eyas.tools.target.embedded import EmbeddedTarget
from production_target import server_argv, service

FAKE_SYSTEMCTL = """#!/bin/sh
# STAND-IN for systemctl: records its argv (one JSON list per call) and answers `show` like systemd.
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> {calls}
case "$1" in
  show) printf 'ActiveState=active\\nSubState=running\\nMainPID=4242\\n' ;;
  start) [ -f {fail} ] && {{ echo "Job for unit failed" >&2; exit 1; }} ;;
esac
exit 0
"""
ODD_UNIT = "vllm;touch pwned $(id).service"  # no real unit is called this; it proves nothing reaches a shell unquoted


def _ok() -> CheckResult:
    return CheckResult(name="health", status=Status.OK, message="generating")


def test_systemd_service_passes_exact_argv_to_systemctl(tmp_path: Path) -> None:
    calls, fail = tmp_path / "calls.jsonl", tmp_path / "fail"
    script = tmp_path / "systemctl"
    script.write_text(FAKE_SYSTEMCTL.format(calls=shlex.quote(str(calls)), fail=shlex.quote(str(fail))))
    script.chmod(0o755)
    unit = SystemdService(LocalHost(), ODD_UNIT, _ok, SYSTEM_CLOCK, systemctl=str(script))
    os.chdir(tmp_path)

    status = unit.status()
    unit.stop()
    unit.start()
    unit.reload()
    assert status.active and status.main_pid == 4242 and status.backend == "systemd"
    assert unit.drop_in_path() == f"/etc/systemd/system/{ODD_UNIT}.d/zz-eyas-drafter.conf"
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["show", "--property=ActiveState,SubState,MainPID", ODD_UNIT],
        ["stop", ODD_UNIT],
        ["start", "--no-block", ODD_UNIT],
        ["daemon-reload"],
    ]
    assert not list(tmp_path.glob("pwned*"))
    fail.touch()
    with pytest.raises(ServiceError, match="Job for unit failed"):
        unit.start()


@pytest.mark.slow
def test_standin_service_runs_the_unit_as_written(production_target: EmbeddedTarget) -> None:
    """Stopping and starting it for real is in test_production_stop.py (one restart of vLLM serves both)."""
    unit = service(production_target)
    written = parse_unit_file(production_target.unit_file.read_text())
    status = unit.status()
    assert status.active and status.backend == "stand-in" and "stand-in job" in status.detail
    assert server_argv(production_target) == written.exec_start
    assert unit.health().status is Status.OK
    assert unit.drop_in_path() == f"{production_target.unit_file}.d/zz-eyas-drafter.conf"
