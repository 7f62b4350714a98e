"""The data phase launched as detached jobs on a host (local and over SSH): generation beside the drafter
check, progress read back from the job logs, and a relaunch that re-attaches instead of starting twice.

Stand-in: the target server is tests/openai_stub.py (the real server's runs are in test_data_real.py).
The "ML interpreter" is this test's own Python, which has the openai package generate.py needs; a local
drafter directory is validated without huggingface_hub.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from eyas.tools.config import LOCAL, HostConfig, TargetConfig
from eyas.tools.data_phase import (
    PROMPT_SET,
    GenerationSettings,
    describe_progress,
    job_progress,
    launch_data_phase,
    upload_prompt_set,
)
from eyas.tools.host import Host
from eyas.tools.jobs import Jobs, JobState, JobStatus
from openai_stub import MODEL, OpenAIStub
from safetensors_files import write_drafter
from waiting import wait_for


def test_generation_and_download_run_side_by_side_as_jobs(host: Host, workdir: str) -> None:
    host_config = HostConfig(address=LOCAL, python=sys.executable, workdir=workdir)
    drafter = write_drafter(Path(workdir) / "drafter")
    with OpenAIStub() as stub:
        target = TargetConfig(base_url=stub.url.removesuffix("/v1"), model=MODEL)
        prompts = upload_prompt_set(host, workdir)
        settings = GenerationSettings(
            input=prompts, output=f"{workdir}/data/generated.jsonl", concurrency=4, max_tokens=8, limit=40
        )
        states = launch_data_phase(host, host_config, target, run_id="run1", generation=settings, drafter=str(drafter))
        assert set(states) == {"generate", "download"}
        jobs = Jobs(host, workdir)

        def both_finished() -> list[JobState] | None:
            states = jobs.statuses(["run1-generate", "run1-download"])
            return states if all(state.finished for state in states) else None

        finished = wait_for(both_finished, 60, what="both jobs to finish")
        assert [state.status for state in finished] == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED]
        assert stub.requests >= 40

        generated = [json.loads(line) for line in Path(settings.output).read_text().splitlines()]
        first_40 = [json.loads(line)["id"] for line in PROMPT_SET.read_text().splitlines()[:40]]
        assert sorted(record["id"] for record in generated) == sorted(first_40)
        progress = job_progress(jobs, "run1-generate")
        assert progress is not None and progress["done"] == progress["total"] == 40 and progress["failed"] == 0
        assert describe_progress(progress).startswith("40/40 (100%)")
        download = job_progress(jobs, "run1-download")
        assert download is not None and download["unit"] == "bytes" and download["done"] == download["total"] > 0

        again = launch_data_phase(host, host_config, target, run_id="run1", generation=settings, drafter=str(drafter))
        assert {role: state.pid for role, state in again.items()} == {role: state.pid for role, state in states.items()}
        assert len(Path(settings.output).read_text().splitlines()) == 40


@pytest.mark.parametrize(
    ("progress", "text"),
    [
        (
            {"done": 120, "total": 313, "failed": 2, "tokens_per_s": 85.4, "eta_s": 720},
            "120/313 (38%), 2 failed, 85 tokens/s, ETA 12 min",
        ),
        ({"done": 1.5e9, "total": 3e9, "unit": "bytes"}, "1.50 GB of 3.00 GB (50%)"),
        ({"done": 0, "total": 25000, "eta_s": None}, "0/25,000 (0%)"),
    ],
)
def test_progress_reads_as_one_line(progress: dict[str, float], text: str) -> None:
    assert describe_progress(progress) == text
