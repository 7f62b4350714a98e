"""Both reports say what ran: every size with its meaning, the prompts and their split, training's set-up and
throughput, the drafter's folder with its files (listed on the host by the report node, which runs for real on this
machine's host), and the versions of eyas and of the host's packages; what was not recorded says so. Text from the
host (a file's name) is shown, never interpreted. The drafter's folder is left ready to publish: a model card, and a
config naming the verifier by its hub id with the k evaluated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from eyas.agents.faces.report_html.page import render_html
from eyas.graph.context import RunContext
from eyas.graph.phases.report.node import report_node
from eyas.graph.state import RunState
from eyas.tools.settings.sizes import DEMO
from local_run import local_context

HOSTILE = "notes|<b>x.txt"
EYAS = {"version": "0.2.0", "commit": "63707942aac94b712200db2815e67ad7cb7773ff+dirty"}
VERSIONS = {"vllm": "0.32.0", "speculators": "0.9.0", "transformers": "5.19.0", "torch": "2.13.0+cpu"}
PROMPTS = {"source": "sharegpt", "held_out_percent": 5.0, "scanned": 563, "train": 24, "held_out": 16, "skipped": 308}


def trained(tmp_path: Path, model_dir: str = "/models/m") -> tuple[RunContext, dict[str, Any]]:
    """A run whose training ended: its drafter's folder on the host with its files and metrics."""
    ctx = local_context(tmp_path, model_dir)
    ctx.run.root.mkdir(parents=True)
    drafter = Path(ctx.artifact("drafter"))
    drafter.mkdir(parents=True)
    (drafter / "config.json").write_text("{}")
    (drafter / "model.safetensors").write_bytes(b"\0" * 123_456)
    (drafter / HOSTILE).write_text("x")
    rows = [{"split": "train", "step": step, "loss": 9.0, "tokens_per_s": 1000.0 * step} for step in (1, 2, 3)]
    (drafter / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    state = {"run_id": "r1", "eyas": EYAS, "sizes": DEMO.model_dump(), "prompts": PROMPTS,
             "compat": {"versions": VERSIONS}, "jobs": {"train": ["r1.train"]},
             "artifacts": {"drafter": str(drafter)}, "decisions": []}  # fmt: skip
    return ctx, state


def test_the_markdown_report_says_what_ran(tmp_path: Path) -> None:
    ctx, state = trained(tmp_path)
    update = report_node(RunState(**state), Runtime(context=ctx))  # type: ignore[typeddict-item]
    report = update["report"]
    assert report.splitlines()[2] == "**Outcome:** ended with no evaluation, no stop and no failure on record"
    assert f"| samples | {DEMO.samples:,} | prompts to generate answers for |" in report
    assert f"| ttt_steps | {DEMO.ttt_steps} | training-time-test steps" in report
    assert "- **prompts:** sharegpt: 24 trained on, 16 held out (5.0% of conversations" in report
    assert "563 scanned, 308 skipped" in report
    assert "- **training:** peak learning rate 0.001, optimizer auto" in report
    assert "- **training throughput:** 2,000 tokens/s (median of 3 steps; 1,000 to 3,000)" in report
    drafter = state["artifacts"]["drafter"]
    assert f"- **drafter:** {drafter}: README.md (" in report and "config.json (2 B), metrics.jsonl" in report
    assert "model.safetensors (123.46 KB)" in report
    assert "notes\\|&lt;b&gt;x.txt" in report and "<b>" not in report  # shown, not a cell break or markup
    assert f"- **eyas:** 0.2.0, commit {EYAS['commit']}" in report
    assert "- **host packages:** vllm 0.32.0, speculators 0.9.0, torch 2.13.0+cpu, transformers 5.19.0" in report

    (ctx.run.root / "run.json").write_text("{}")
    page = render_html(ctx.run.root, {**state, **update})
    what_ran = page[page.index('<section id="what-ran">') :]
    assert (
        f"{drafter}: README.md (" in what_ran and "config.json (2 B)" in what_ran and "notes|&lt;b&gt;x.txt" in what_ran
    )
    assert "<b>x" not in page
    assert "<td>samples</td><td>" in what_ran and "vllm 0.32.0, speculators 0.9.0" in what_ran


def test_what_was_not_recorded_says_so(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    ctx.run.root.mkdir(parents=True)
    update = report_node(RunState(run_id="r1", stopped="rejected at the data gate: later"), Runtime(context=ctx))
    report = update["report"]
    assert report.splitlines()[2] == "**Outcome:** stopped at the data gate: rejected: later"
    unrecorded = (
        "- **prompts:** no prompts were split",
        "- **training:** no training ran",
        "- **training throughput:** not recorded",
        "- **drafter:** no drafter was trained",
        "- **eyas:** not recorded",
        "- **host packages:** not recorded (the host was not verified)",
    )
    for line in unrecorded:
        assert line in report, report
    assert "drafter_files" not in update


def test_a_drafter_folder_that_is_gone_is_said_unlisted(tmp_path: Path) -> None:
    ctx = local_context(tmp_path)
    ctx.run.root.mkdir(parents=True)
    drafter = ctx.artifact("drafter")  # never made: the host lists nothing
    state = RunState(run_id="r1", jobs={"train": ["r1.train"]}, artifacts={"drafter": drafter})
    update = report_node(state, Runtime(context=ctx))
    assert "drafter_files" not in update and f"- **drafter:** {drafter} (its files were not listed)" in update["report"]


HUB_CACHE_DIR = "/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/0123abcd"


def speculators_config(verifier: str) -> dict[str, Any]:
    """The speculators_config a trained drafter's config.json holds (train.py saves speculators' own)."""
    method = {"proposal_type": "greedy", "speculative_tokens": 1, "accept_tolerance": 0.0, "verifier_accept_k": 1}
    return {"speculators_model_type": "eagle3", "speculators_config": {
        "algorithm": "eagle3", "default_proposal_method": "greedy", "proposal_methods": [method],
        "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": verifier},
    }}  # fmt: skip


def test_the_drafter_is_left_ready_to_publish_with_a_card_and_its_verifier_by_hub_id(tmp_path: Path) -> None:
    ctx, state = trained(tmp_path, HUB_CACHE_DIR)  # a model the hub cache holds: its folder says its id
    drafter = Path(ctx.artifact("drafter"))
    (drafter / "config.json").write_text(json.dumps(speculators_config(HUB_CACHE_DIR)))
    measured = {
        "k": 3, "mean_acceptance_length": 1.75, "acceptance_rate": 0.25, "per_position": [0.5, 0.2, 0.05],
        "prompts": 16, "tokens_per_s_baseline": 20.0, "tokens_per_s_speculative": 26.0, "speedup": 1.3,
        "intervals": {"level": 0.95, "mean_acceptance_length": [1.6, 1.9], "speedup": [1.1, 1.5]},
    }  # fmt: skip
    Path(ctx.artifact("evaluation")).write_text(json.dumps(measured))
    state["jobs"]["evaluate"] = ["r1.evaluate"]

    report_node(RunState(**state), Runtime(context=ctx))  # type: ignore[typeddict-item]

    config = json.loads((drafter / "config.json").read_text())["speculators_config"]
    assert config["verifier"]["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert config["proposal_methods"][0]["speculative_tokens"] == 3
    card = (drafter / "README.md").read_text()
    front, body = card.split("\n---\n", 1)
    assert front.splitlines()[0] == "---" and "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in front
    assert "library_name: speculators" in front and "- eagle3" in front
    assert "sharegpt: 24 trained on, 16 held out" in body and f"| samples | {DEMO.samples:,} |" in body
    assert "- mean acceptance length: 1.750 (95% interval 1.600 to 1.900)" in body
    assert "- speedup (decode tokens/s): 1.300 (95% interval 1.100 to 1.500)" in body
    assert "- acceptance by draft position: 1: 0.500, 2: 0.200, 3: 0.050" in body
    speculative = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
    assert f"vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --speculative-config '{speculative}'" in body


def test_a_card_without_hub_id_or_evaluation_says_so_and_keeps_the_verifier_path(tmp_path: Path) -> None:
    ctx, state = trained(tmp_path)  # target "m" in /models/m: nothing names its hub id
    drafter = Path(ctx.artifact("drafter"))
    (drafter / "config.json").write_text(json.dumps(speculators_config("/models/m")))

    report_node(RunState(**state), Runtime(context=ctx))  # type: ignore[typeddict-item]

    config = json.loads((drafter / "config.json").read_text())["speculators_config"]
    assert config["verifier"]["name_or_path"] == "/models/m"
    assert config["proposal_methods"][0]["speculative_tokens"] == DEMO.num_speculative_tokens
    card = (drafter / "README.md").read_text()
    assert "base_model" not in card and "Hub id not known; served as m." in card
    assert "Not evaluated: the run ended before its evaluation." in card
