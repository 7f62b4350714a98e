"""A failed job is explained by what it said last, not by the wrapper's "job ended with exit code 1": the
monitor's diagnosis and the data gate's refusal of a drafter whose download failed.

Real parts: detached jobs on this machine, and download.py run by a fresh venv's Python, which has no
huggingface_hub, as a host's ML venv may not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.phases.data.drafter import prepare_drafter
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.graph.supervise import diagnose
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, PipelineConfig, TargetConfig
from waiting import wait_for

REPO = "org/tiny-eagle3-typo"


def test_the_diagnosis_quotes_the_jobs_own_last_line(tmp_path: Path) -> None:
    jobs = Jobs(LocalHost(), str(tmp_path))
    said = "echo 'reading 3 files'; echo 'download.py: No such repository org/x on the hub' >&2; exit 1"
    jobs.launch(JobSpec(job_id="r1.download", argv=["sh", "-c", said]))
    ended = wait_for(lambda: (state := jobs.status("r1.download")).finished and state, 30, what="the job to end")
    assert ended.status is JobStatus.FAILED
    tail = jobs.tail("r1.download", 40)
    assert tail.rstrip().endswith("eyas: job ended with exit code 1")  # the wrapper's line, passed over
    assert diagnose(ended, tail) == "Exit code 1; the log ends with: download.py: No such repository org/x on the hub"


def test_the_data_gate_says_why_the_drafter_download_failed(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=60)
    python = tmp_path / "venv" / "bin" / "python"  # the host's ML venv, here a fresh one: no huggingface_hub
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=str(python), workdir=str(tmp_path / "work"))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=str(tmp_path / "model")),
        pipeline=PipelineConfig(drafter_base=REPO),
    )
    ctx = RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK,
                     run=RunDir(tmp_path / "runs" / "r1"), poll_interval_s=0.2)  # fmt: skip
    state: RunState = {"run_id": "r1"}
    drafter = prepare_drafter(state, Runtime(context=ctx))["drafter"]
    assert drafter["error"].startswith(f"{python} has no huggingface_hub package, which downloading {REPO}")
    assert f"`{python} -m pip install huggingface_hub`" in drafter["error"]
    assert "exit 1" not in drafter["error"]
