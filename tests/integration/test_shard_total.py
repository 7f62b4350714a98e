"""A sharded phase's progress as one figure: the shards' counts and throughputs add up and the phase ends with its
slowest shard, in `eyas status` (and the chat, which reads the same rows) and the dashboard's jobs table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eyas.agents.faces.dashboard.views import jobs_table
from eyas.agents.faces.job_table import job_rows
from eyas.agents.faces.report_html.record import RunRecord
from eyas.graph.life.session import run_meta
from eyas.graph.runs import RunDir
from eyas.graph.shard_total import phase_total
from eyas.tools.config_source import ConfigSource
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.progress import TAG
from waiting import wait_for

SHARDS = [
    {"done": 40, "total": 100, "failed": 1, "tokens_per_s": 250.0, "eta_s": 600.0},
    {"done": 90, "total": 100, "failed": 0, "tokens_per_s": 300.0, "eta_s": 60.0},
    {"done": 100, "total": 100, "failed": 2, "tokens_per_s": 280.0, "eta_s": 0.0},  # finished: adds no rate
]


def test_the_phase_total_adds_the_shards_and_ends_with_the_slowest() -> None:
    total = phase_total(SHARDS)
    assert total == {"jobs": 3, "done": 230, "total": 300, "failed": 3, "tokens_per_s": 550.0, "eta_s": 600.0}
    assert phase_total(SHARDS[:1]) is None  # one job's own line says it all
    assert phase_total([SHARDS[0], {}]) is None  # a job that has not reported yet is not counted as a shard
    assert phase_total([SHARDS[2], SHARDS[2]])["eta_s"] == 0.0  # type: ignore[index]


def test_status_rows_and_the_dashboard_show_a_sharded_phase_whole(tmp_path: Path) -> None:
    target = EmbeddedTarget(tmp_path / "cache")
    run = RunDir(tmp_path / "runs" / "sharded").create()
    run.write_meta(run_meta(ConfigSource(None, "a test", target), None, DEMO))
    jobs = Jobs(LocalHost(), str(target.workdir))
    ids = [f"sharded.generate.{index}" for index in range(2)]
    for job_id, seen in zip(ids, SHARDS, strict=False):
        line = TAG + json.dumps(seen)
        jobs.launch(JobSpec(job_id=job_id, argv=[sys.executable, "-c", f"print({line!r}, flush=True)"]))
    wait_for(lambda: all(jobs.status(job_id).finished for job_id in ids), timeout=60, what="the shards ending")

    rows, unreadable = job_rows(run, {"jobs": {"data": ids}})
    assert unreadable is None and [row["job_id"] for row in rows] == [*ids, "all 2 jobs"]
    assert rows[-1]["bar"].endswith(" 130/200") and rows[-1]["eta"] == "10.0 min"
    assert rows[-1]["progress"]["tokens_per_s"] == 550.0  # what the chat's run_status shows beside the bar

    record = RunRecord(run_id="sharded", state={"jobs": {"data": ids}},
                       progress={job_id: [seen] for job_id, seen in zip(ids, SHARDS, strict=False)})  # fmt: skip
    page = jobs_table(record)
    assert "all 2 jobs" in page and '<progress value="130.0" max="200.0">' in page and "10.0 min" in page
