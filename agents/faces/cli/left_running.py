"""What `eyas demo` says last: what it left running on this machine (the embedded target's vLLM server, its pid, port
and memory) and the exact command that stops it.

The demo leaves the server up on purpose: the run it made is explored with it (`eyas chat` talks to it, `eyas deploy`
and `eyas rollback` restart it), and the next `eyas demo` reuses it instead of waiting ~40 s for a new one. What a
user then needs is to know it holds ~3.4 GB, and how to get them back.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import JobStatus
from eyas.tools.jobs.group_memory import group_resident_bytes
from eyas.tools.service.deploy_result import deployed_method
from eyas.tools.settings.units import format_size
from eyas.tools.target.embedded import SERVED_MODEL, EmbeddedTarget
from eyas.tools.target.server import server_state, target_service
from eyas.tools.workloads.speculative import NGRAM_METHOD

# What `EmbeddedTarget.from_env` reads: a stop command typed in another shell must name the same server.
TARGET_ENV = ("EYAS_CACHE_DIR", "EYAS_TARGET_PORT")


def eyas_program() -> str:
    """This eyas as the user's shell reaches it: `eyas` when that is on PATH, else its venv's script (after `make
    demo`, `.venv/bin/eyas`, which no PATH names)."""
    script = Path(sys.executable).parent / "eyas"
    if not script.exists():
        return "eyas"
    on_path = shutil.which("eyas")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "eyas"
    absolute = script.absolute()
    return str(absolute.relative_to(Path.cwd())) if absolute.is_relative_to(Path.cwd()) else str(absolute)


def stop_command() -> str:
    """The command that stops the embedded target's server, with the settings that chose it."""
    settings = [f"{name}={shlex.quote(os.environ[name])}" for name in TARGET_ENV if os.environ.get(name)]
    return " ".join([*settings, shlex.quote(eyas_program()), "target", "down"])


def drop_in_method(text: str) -> str | None:
    """The speculative method of eyas's drop-in: the --speculative-config of its last ExecStart (None: none set)."""
    commands = [line.removeprefix("ExecStart=") for line in text.splitlines() if line.startswith("ExecStart=")]
    return deployed_method(shlex.split(commands[-1])) if commands and commands[-1] else None


def left_running_lines(target: EmbeddedTarget, host: Host) -> list[str]:
    """The demo's last lines: the server it leaves up (pid, address, memory, the method the demo deployed, if one),
    why, and how to stop it; one line when nothing is left running."""
    state = server_state(target, host)
    if state.status is not JobStatus.RUNNING or state.pid is None:
        return [f"Left running: nothing (the target's vLLM server on {target.base_url} is not running)."]
    memory = group_resident_bytes(host, state.pid)
    held = f", holding {format_size(memory)} of memory" if memory is not None else ""
    service = target_service(target, host)
    drafter = "without a drafter"
    if host.exists(service.drop_in_path()):
        # The demo deploys whichever method won its evaluation: n-gram speculation, or its drafter.
        method = drop_in_method(host.read_text(service.drop_in_path()))
        what = "n-gram speculation" if method == NGRAM_METHOD else "the demo's drafter"
        drafter = f"with {what} (drop-in {service.drop_in_path()})"
    return [
        f"Left running: the target's vLLM server (pid {state.pid}, {SERVED_MODEL} {drafter}) on {target.base_url}"
        f"{held}. It stays up for `eyas chat`, `eyas deploy` and `eyas rollback` on this run, and the next demo "
        "reuses it.",
        f"Stop it with: {stop_command()}",
    ]
