"""Put the workload scripts on a host: they run there with the host's own ML interpreter."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import eyas.tools.workloads
from eyas.tools.hosts.host import Host

WORKLOADS_DIR = Path(eyas.tools.workloads.__file__).resolve().parent


def workload_path(name: str) -> Path:
    path = WORKLOADS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no workload script named {name} in {WORKLOADS_DIR}")
    return path


def remote_workloads_dir(workdir: str) -> str:
    """Where the workload scripts live on a host, below eyas's work directory there."""
    return f"{workdir.rstrip('/')}/workloads"


LISTING = "sha256sum *.py"  # what a host's workloads directory holds, run in it


def upload_workloads(host: Host, workdir: str) -> str:
    """Copy the workload scripts to the host (only those that changed); returns their directory there."""
    remote = remote_workloads_dir(workdir)
    listing = host.run(f"mkdir -p {shlex.quote(remote)} && cd {shlex.quote(remote)} && {LISTING} 2>/dev/null")
    for script in changed_scripts(listing.stdout):
        host.write_bytes(f"{remote}/{script.name}", script.read_bytes(), mode=0o755)
    return remote


def changed_scripts(listing: str) -> list[Path]:
    """The workload scripts that a host's `LISTING` output does not hold as they are here: new or changed."""
    lines = (line.split(maxsplit=1) for line in listing.splitlines() if line.strip())
    present = {name: digest for digest, name in lines}
    scripts = sorted(path for path in WORKLOADS_DIR.glob("*.py") if path.name != "__init__.py")
    return [path for path in scripts if present.get(path.name) != hashlib.sha256(path.read_bytes()).hexdigest()]
