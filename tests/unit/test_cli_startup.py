"""Start-up time: every `eyas` process imports the CLI, so the CLI must not import what only some commands need."""

from __future__ import annotations

import json
import subprocess
import sys

# Each takes 0.1-0.6 s to import; the commands that use them import them (the report, the agent LLM, SSH hosts, the
# graph and its checkpoints).
DEFERRED = ("matplotlib", "openai", "paramiko", "langgraph")


def test_importing_the_cli_loads_no_heavy_dependency() -> None:
    loaded = f"[m for m in {DEFERRED!r} if m in sys.modules]"
    probe = f"import json, sys, eyas.agents.faces.cli.main; print(json.dumps({loaded}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == [], f"`import eyas.agents.faces.cli.main` loaded {done.stdout.strip()}"
