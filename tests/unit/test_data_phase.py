"""The data phase's jobs launched as detached jobs on a host (local and over SSH): generation, and beside it the
drafter's download job (which a run starts before the data gate: graph/phases/data/drafter.py), progress read back
from the job logs, and a relaunch that re-attaches instead of starting twice.

Stand-in: the target server is tests/support/openai_stub.py (the real server's runs are in test_data_real.py).
The "ML interpreter" is this test's own Python, which has the openai package generate.py needs; a local
drafter directory is validated without huggingface_hub.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from data_jobs import job_progress, launch_data_jobs, upload_prompt_set
from eyas.graph.phases.data.jobs import GenerationSettings
from eyas.tools.hosts.host import Host
from eyas.tools.jobs.detached import Jobs, JobState, JobStatus
from eyas.tools.settings.config import LOCAL, HostConfig, TargetConfig
from eyas.tools.settings.sizes import PROMPT_SET
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
            input=prompts,
            output=f"{workdir}/data/generated.jsonl",
            concurrency=4,
            max_tokens=8,
            max_seq_len=4096,
            limit=40,
        )
        states = launch_data_jobs(host, host_config, target, run_id="run1", generation=settings, drafter=str(drafter))
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
        download = job_progress(jobs, "run1-download")
        assert download is not None and download["unit"] == "bytes" and download["done"] == download["total"] > 0

        again = launch_data_jobs(host, host_config, target, run_id="run1", generation=settings, drafter=str(drafter))
        assert {role: state.pid for role, state in again.items()} == {role: state.pid for role, state in states.items()}
        assert len(Path(settings.output).read_text().splitlines()) == 40
