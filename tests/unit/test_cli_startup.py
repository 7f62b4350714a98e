"""Start-up time: every `eyas` process imports the CLI, so the CLI must not import what only some commands need; and
the commands an operator runs every few seconds under `watch` (`eyas status`, `eyas runs`, `eyas jobs`) read runs and
jobs without the graph: no LangGraph (a second of start-up), no agent, no HTTP client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gated_runs import run_with_jobs

# Each takes 0.1-0.6 s to import; the commands that use them import them (the report, the agent LLM, SSH hosts, the
# graph and its checkpoints).
DEFERRED = ("matplotlib", "openai", "paramiko", "langgraph")
# And what reading a run or the jobs does without: the graph and its tracers, the HTTP client, the metrics parser,
# the retry policy's library.
NOT_FOR_READING = (
    *DEFERRED,
    "langchain_core",
    "langsmith",
    "httpx",
    "prometheus_client",
    "tenacity",
    "eyas.graph.pipeline",
)
EXAMPLES = Path(__file__).resolve().parents[2] / "runs" / "examples"
# `eyas ARGS` run in-process by the program's own entry point; then what it imported of NOT_FOR_READING, on stderr.
READ_PROBE = f"""
import json, sys
from eyas.agents.faces.cli.entry import main
sys.argv = ["eyas", *json.loads(sys.argv[1])]
try:
    main()
finally:
    print(json.dumps([m for m in {NOT_FOR_READING!r} if m in sys.modules]), file=sys.stderr)
"""


def test_importing_the_cli_loads_no_heavy_dependency() -> None:
    loaded = f"[m for m in {DEFERRED!r} if m in sys.modules]"
    probe = f"import json, sys, eyas.agents.faces.cli.main; print(json.dumps({loaded}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == [], f"`import eyas.agents.faces.cli.main` loaded {done.stdout.strip()}"


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runs folder as an operator watches it: the recorded examples, and a run at its data gate (the real graph
    and checkpoint DB) whose two jobs ran on this machine; the environment that points eyas at it."""
    root = tmp_path_factory.mktemp("watched")
    shutil.copytree(EXAMPLES, root / "runs")
    run_with_jobs(root, "gated", ["gated.generate-0", "gated.generate-1"])
    return {**os.environ, "EYAS_RUNS_DIR": str(root / "runs"), "EYAS_CACHE_DIR": str(root / "cache"), "COLUMNS": "100"}


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["status", "gated"], "waiting at the approval gate of data"),  # its checkpoint read, its jobs' progress
        (["status", "full-pipeline", "--json"], '"run_id": "full-pipeline"'),  # a recorded run: no checkpoint
        (["runs"], "full-pipeline"),
        (["jobs"], "gated.generate-1"),
    ],
)
def test_reading_runs_and_jobs_imports_no_graph(watched: dict[str, str], argv: list[str], shown: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", READ_PROBE, json.dumps(argv)], env=watched, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and shown in done.stdout, done.stdout + done.stderr
    loaded = json.loads(done.stderr.splitlines()[-1])
    assert loaded == [], f"`eyas {' '.join(argv)}` imported {loaded}"
