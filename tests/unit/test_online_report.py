"""The run report of an online or hybrid run shows, per epoch, the samples fetched online, the bytes written and
deleted, and the disk's high-water mark against the bound, from train.py's online_summary.json beside the drafter
(read on the host as the report reads the drafter's metrics); a CUDA run, where speculators' dataset fetched and
eyas counted nothing, says so instead; an offline run, or one whose file is absent, shows none of it. The report
node runs for real on this machine's host."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from eyas.agents.faces.report_html.page import render_html
from eyas.graph.context import RunContext
from eyas.graph.phases.report.node import ONLINE_SUMMARY, report_node
from eyas.graph.state import RunState
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.planning.estimate import PlanInputs, estimate
from eyas.tools.planning.hidden_states_mode import choose_mode
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.settings.units import format_size, parse_size

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

from local_run import local_context
from online_fetch import OnlineSummary

BOUND = 3_758_694_400
SUMMARY = {
    "window": 8,
    "bound_bytes": BOUND,
    "epochs": [
        {"epoch": 0, "fetched": 12_783, "bytes_written": 2_900_000_000_000, "bytes_deleted": 2_900_000_000_000,
         "high_water_bytes": 3_100_000_000},
        {"epoch": 1, "fetched": 12_783, "bytes_written": 2_910_000_000_000, "bytes_deleted": 2_909_000_000_000,
         "high_water_bytes": 3_700_000_000},
    ],
}  # fmt: skip


def planned(requested: str) -> dict[str, Any]:
    """A plan whose mode is the one asked for, for Kimi's 5.9 TB on 2.9 TB."""
    dims = ModelDims(hidden_size=7168, num_layers=61, vocab_size=163840)
    inputs = PlanInputs(model=dims, samples=25_000, max_tokens=4096, max_seq_len=8192, generation_tok_s=2000.0,
                        free_disk_bytes=parse_size("2.9TB"))  # fmt: skip
    mode = choose_mode(requested, inputs, estimate(inputs), True)
    return {"extraction_mode": mode.model_dump(mode="json"), "verdict": "v"}


def reported(ctx: RunContext, plan: dict[str, Any]) -> dict[str, Any]:
    ctx.run.root.mkdir(parents=True, exist_ok=True)
    state: RunState = {"run_id": "r1", "jobs": {"train": ["r1.train"]}, "plan": plan}
    return report_node(state, Runtime(context=ctx))


def test_an_online_run_reports_each_epoch_against_the_bound(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    drafter = Path(ctx.artifact("drafter"))
    drafter.mkdir(parents=True)
    (drafter / ONLINE_SUMMARY).write_text(json.dumps(SUMMARY))
    update = reported(ctx, planned("auto"))  # hybrid: the first K samples on disk, the rest fetched
    assert update["online"] == SUMMARY
    report = update["report"]
    assert "## Online hidden states" in report and f"(bound {format_size(BOUND)})" in report
    for epoch in SUMMARY["epochs"]:
        row = (
            f"| {epoch['epoch']} | {epoch['fetched']:,} | {format_size(epoch['bytes_written'])} | "
            f"{format_size(epoch['bytes_deleted'])} | {format_size(epoch['high_water_bytes'])} | "
            f"{epoch['high_water_bytes'] / BOUND:.0%} |"
        )
        assert row in report, report
    (ctx.run.root / "run.json").write_text("{}")
    page = render_html(ctx.run.root, {**update, "run_id": "r1", "jobs": {"train": ["r1.train"]}})
    assert '<div id="online">' in page and "samples fetched" in page
    assert '<span data-key="high_water_bytes" data-value="3700000000">' in page


def test_an_offline_run_or_a_missing_summary_shows_nothing_online(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    absent = reported(ctx, planned("online"))
    assert "online" not in absent and "Online hidden states" not in absent["report"]
    drafter = Path(ctx.artifact("drafter"))
    drafter.mkdir(parents=True)
    (drafter / ONLINE_SUMMARY).write_text(json.dumps(SUMMARY))
    offline = reported(ctx, planned("offline"))  # a file left there by something else is not read
    assert "online" not in offline and "Online hidden states" not in offline["report"]
    (ctx.run.root / "run.json").write_text("{}")
    assert '<div id="online">' not in render_html(ctx.run.root, {"run_id": "r1", **offline})


def test_a_cuda_run_says_speculators_fetched_and_eyas_counted_nothing(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    drafter = Path(ctx.artifact("drafter"))
    drafter.mkdir(parents=True)
    # What train.run_speculators writes (train_online.speculators_online_summary): the window, the bound, the
    # workers, no epochs.
    summary = asdict(OnlineSummary(8, BOUND, trainer="speculators", gpus=8, workers=1))
    (drafter / ONLINE_SUMMARY).write_text(json.dumps(summary))
    update = reported(ctx, planned("auto"))
    report = update["report"]
    section = report[report.index("## Online hidden states") :]
    assert "speculators' own dataset on CUDA" in section and "each of 8 GPU(s) with 1 dataloader worker(s)" in section
    assert f"at most 8 at once (bound {format_size(BOUND)})" in section
    assert "eyas does not count them on CUDA" in section and "skipped there with a warning" in section
    assert "| epoch |" not in section  # no table of counts nobody made
    (ctx.run.root / "run.json").write_text("{}")
    page = render_html(ctx.run.root, {**update, "run_id": "r1", "jobs": {"train": ["r1.train"]}})
    online = page[page.index('<div id="online">') :]
    assert "eyas does not count them on CUDA" in online and "samples fetched" not in online
