"""An eyas.toml for the `eyas jobs` commands: the local host with a work directory, and, for Ray, its cluster."""

from __future__ import annotations

import sys
from pathlib import Path


def jobs_config(path: Path, workdir: Path, cluster: str = "") -> Path:
    """Write the config (`cluster`: a `[cluster]` section's TOML, or nothing for detached jobs) and return its path."""
    path.write_text(
        f"""
[hosts.local]
address = "local"
python = "{sys.executable}"
workdir = "{workdir}"

[target]
host = "local"
base_url = "http://127.0.0.1:9"
model = "m"
{cluster}
"""
    )
    return path


# A host whose SSH port refuses at once and a server that is not there: the run starts, then stops in plan.
UNREACHABLE = """
[hosts.box]
address = "127.0.0.1"
port = 1
known_hosts = "{known_hosts}"
python = "/usr/bin/python3"
workdir = "/tmp/eyas-unreachable"

[target]
host = "box"
base_url = "http://127.0.0.1:1"
model = "m"
"""
