"""A second embedded target that plays production for the tests that stop, restart and redeploy it (the shared
`embedded_target` must stay up for the rest of the session). Nothing here is a stand-in except the service
manager: containers have no systemd as PID 1, so tools/service/standin.py runs the unit file, as on such hosts.

Production keeps its API behind a key, as operators' often does: its unit sets VLLM_API_KEY in Environment=, so vLLM
refuses every /v1 request without it, and every test that drives eyas against production checks that eyas read the
key from the unit and sent it (tools/launch/api_key.py)."""

from __future__ import annotations

import os
from pathlib import Path

from eyas.tools.hosts.local import LocalHost
from eyas.tools.service.standin import UnitJobService
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import server_spec, target_service, unit_file_text

# The tests' own range is 18850-18859; two test sessions at once (two checkouts) each set their own.
PRODUCTION_PORT = int(os.environ.get("EYAS_TEST_PRODUCTION_PORT", "18850"))


def production_target(port: int) -> EmbeddedTarget:
    """The cached venv and model (built by `make target`), on a port of the tests' own range (18850-18859)."""
    return EmbeddedTarget(EmbeddedTarget.from_env().cache_dir, port=port)


# Not shaped like any token the redactor knows: only eyas remembering the key it read hides it.
PRODUCTION_KEY = "prodKey5Jw8Ht3Qz1"
START_TIMEOUT_S = 900.0


def start_production(target: EmbeddedTarget) -> None:
    """The embedded target's own unit (as `eyas target up` writes it) with the key in Environment=, run by the
    stand-in service manager until it passes eyas's health check (which must send the key to pass)."""
    host = LocalHost()
    unit = service(target)
    if not unit.status().active:
        text = unit_file_text(server_spec(target, eager=True))
        keyed = text.replace("[Service]\n", f'[Service]\nEnvironment="VLLM_API_KEY={PRODUCTION_KEY}"\n')
        host.write_text(str(target.unit_file), keyed)
        unit.start()
    unit.wait_healthy(START_TIMEOUT_S, lambda message: None)


def service(target: EmbeddedTarget) -> UnitJobService:
    return target_service(target, LocalHost())


def argv_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def server_argv(target: EmbeddedTarget) -> list[str]:
    """The real argv of the server process: the child of the stand-in job's wrapper (its pid file)."""
    pid = service(target).status().main_pid
    assert pid is not None, "the production target does not run"
    return child_argv(pid)


def child_argv(pid: int) -> list[str]:
    """The argv of the one child of a stand-in job's wrapper (`pid`): the unit's own process."""
    children = [
        int(entry.name) for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _parent(int(entry.name)) == pid
    ]  # fmt: skip
    assert len(children) == 1, children
    return argv_of(children[0])


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
