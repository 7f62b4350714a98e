"""One reading of a gate's view (agents/faces/gate_text.py) for both faces: the terminal's panel and the
dashboard's HTML show the same sections, the Ray cluster's among them, and commands whole; and the views recorded
in the example run read back to the very JSON they were recorded as, so that the run still replays."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime
from rich.console import Console

from eyas.agents.faces.chat_control import ChatPipeline
from eyas.agents.faces.cli.run_ui import gate_panel as terminal_panel
from eyas.agents.faces.dashboard.views import gate_panel as dashboard_panel
from eyas.agents.faces.gate_text import cluster_lines, gate_sections, gate_text
from eyas.agents.faces.report_html.sections import h
from eyas.graph.context import RunContext
from eyas.graph.gates.view import FailureView, GateView, gate_view, read_view
from eyas.graph.life.run_view import read_run
from eyas.graph.phases.data.drafter import prepare_drafter
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import JobSpec
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.recording.transcript import ApprovalEvent, NodeEvent
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.settings.config import EyasConfig, HostConfig, PipelineConfig, TargetConfig, load_config
from eyas.tools.settings.sizes import DEMO
from gated_runs import run_at_failure_gate
from jobs_config import jobs_config

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline" / "transcript.jsonl"

RAY = """
[cluster]
executor = "ray"
ray_address = "http://10.0.0.5:8265"

[cluster.resources.generate]
num_cpus = 2

[cluster.resources.extract]
num_gpus = 1
labels = { role = "gpu" }
"""

STATE: RunState = {
    "sizes": DEMO.model_dump(),
    "plan": {"fits": True, "verdict": "Fits", "phases": {"data": {"phase_hours": 0.25, "disk_bytes": 1000}}},
    "verification": {"health": {"status": "ok", "message": "up and generating"}},
}


def context(tmp_path: Path, cluster: str) -> RunContext:
    config = load_config(jobs_config(tmp_path / "eyas.toml", tmp_path / "work", cluster))
    return RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK,
                      run=RunDir(tmp_path / "runs" / "r1"), policy=None)  # fmt: skip


def job(job_id: str, *argv: str) -> JobSpec:
    return JobSpec(job_id=job_id, argv=["python", "generate.py", *argv])


def terminal(view: GateView | FailureView, width: int = 200) -> str:
    console = Console(record=True, width=width)
    console.print(terminal_panel(view))
    return console.export_text()


def dashboard(view: GateView | FailureView) -> str:
    return dashboard_panel("r1", "gate-1", view, "csrf-1", None)


def test_both_faces_show_where_each_job_goes_on_the_ray_cluster_and_what_it_asks(tmp_path: Path) -> None:
    specs = [job("r1.generate-0"), job("r1.generate-1"), job("r1.extract-0"), job("r1.download")]
    view = gate_view("data", STATE, context(tmp_path, RAY), specs)
    expected = [
        "jobs go to the Ray cluster at http://10.0.0.5:8265",
        "r1.generate-0: num_cpus=2.0",
        "r1.generate-1: num_cpus=2.0",
        "r1.extract-0: num_gpus=1.0, labels={'role': 'gpu'}",
        "r1.download: asks nothing (runs on the head node)",
    ]
    assert cluster_lines(view.cluster) == expected
    html = dashboard(view)
    assert "<h3>Ray cluster</h3>" in html
    assert all(h(line) in html for line in expected), html
    shown = terminal(view)
    assert all(line in shown for line in expected), shown
    # Stored as the JSON the gate has always stored: each job's asks without the unset ones.
    stored = view.model_dump(mode="json")
    assert stored["cluster"] == {
        "executor": "ray",
        "ray_address": "http://10.0.0.5:8265",
        "resources": {
            "r1.generate-0": {"num_cpus": 2.0, "labels": {}},
            "r1.generate-1": {"num_cpus": 2.0, "labels": {}},
            "r1.extract-0": {"num_gpus": 1.0, "labels": {"role": "gpu"}},
            "r1.download": {"labels": {}},
        },
    }
    assert read_view(stored) == view


def test_a_gate_without_a_cluster_shows_no_ray_section_and_stores_none(tmp_path: Path) -> None:
    view = gate_view("data", STATE, context(tmp_path, ""), [job("r1.generate")])
    stored = view.model_dump(mode="json")
    assert "cluster" not in stored and "production" not in stored and "policy" not in stored
    assert "Ray cluster" not in dashboard(view) and "Ray cluster" not in terminal(view)
    assert "up and generating" in dashboard(view) and "up and generating" in terminal(view)


def test_a_command_longer_than_the_terminal_is_shown_whole(tmp_path: Path) -> None:
    token = "--inherit=" + "x" * 150 + "END"  # one word: wrapped at spaces it would not fit, so it folds
    view = gate_view("data", STATE, context(tmp_path, ""), [job("r1.generate", "--out", "/data/out", token)])
    shown = terminal(view, width=80)
    assert "".join(shown.replace("│", "").split()).count(f"pythongenerate.py--out/data/out{token}") == 1
    assert f'<code class="command">python generate.py --out /data/out {token}</code>' in dashboard(view)


def test_the_plan_figures_read_in_words_and_units(tmp_path: Path) -> None:
    """The state keeps phase_hours 0.25 and disk_bytes 1000; the operator reads a duration and a size."""
    shown = terminal(gate_view("data", STATE, context(tmp_path, ""), []), width=160)
    assert "15 min" in shown and "1.00 KB" in shown
    assert "phase_hours" not in shown and "disk_bytes" not in shown and "True" not in shown


def test_a_gate_shows_no_raw_value(tmp_path: Path) -> None:
    """A short phase, an odd byte count, a yes/no and a figure not measured: words and units, never a Python repr."""
    phases = {"data": {"phase_hours": 0.038, "disk_bytes": 145013, "downtime_hours": None}}
    state: RunState = {**STATE, "plan": {"fits": True, "verdict": "Fits", "total_hours": 3.41, "phases": phases}}
    for shown in (
        terminal(gate_view("data", state, context(tmp_path, ""), []), width=80),
        dashboard(gate_view("data", state, context(tmp_path, ""), [])),
    ):
        assert "2 min" in shown and "0.04 h" not in shown and "145.01 KB" in shown and "yes" in shown, shown
        assert "None" not in shown and "[]" not in shown and "True" not in shown, shown
        assert not re.search(r"\d\.\d{3,}", shown), shown


def supplied(samples: int) -> RunState:
    """STATE on the shipped prompt set at `samples`, with the prompt supply counted as the plan node counts it."""
    sizes = DEMO.model_copy(update={"samples": samples, "prompt_source": "shipped"})
    supply = count_prompts(None, Figures(**planned_sizes(sizes)))
    plan = {**STATE["plan"], "prompt_supply": supply.model_dump(mode="json")}
    return {**STATE, "sizes": sizes.model_dump(), "plan": plan}


def test_the_data_gate_shows_the_prompt_supply_and_a_policy_stops_where_the_source_is_short(tmp_path: Path) -> None:
    ctx = context(tmp_path, "")
    ctx.policy = Policy()  # every budget open: only the prompts can stop it
    short = gate_view("data", supplied(25_000), ctx, [job("r1.generate")])
    supply, policy = short.prompt_supply, short.policy
    assert supply is not None and (supply.available, supply.samples, supply.enough) == (313, 25_000, False)
    assert policy is not None and not policy.approve
    assert (
        "the prompt source holds too few prompts: Too few prompts: the shipped prompt set holds 313" in policy.reasons
    )
    for shown in (terminal(short, width=1000), dashboard(short)):
        assert "TOO FEW PROMPTS" in shown and "generate 300 samples instead of 25,000" in shown, shown
    assert read_view(short.model_dump(mode="json")) == short

    enough = gate_view("data", supplied(100), ctx, [job("r1.generate")])
    assert enough.policy is not None and enough.policy.approve, enough.policy
    shown = terminal(enough, width=1000)
    assert "TOO FEW" not in shown and "Prompts: the shipped prompt set holds 313 usable prompts" in shown
    # A later gate neither shows nor weighs it: the prompts were split and answered by then.
    later = gate_view("extract", supplied(25_000), ctx, [])
    assert later.prompt_supply is None and "prompt_supply" not in later.model_dump(mode="json")
    assert later.policy is not None and later.policy.approve


def recorded_views() -> list[tuple[str, Any]]:
    """The views the example run's gates recorded: each gate node's output, and the plan each approval showed."""
    views: list[tuple[str, Any]] = []
    for event in read_transcript(EXAMPLE).events:
        if isinstance(event, NodeEvent) and event.phase == "end" and event.node.startswith("gate_"):
            views.append((event.node, event.output))
        elif isinstance(event, ApprovalEvent) and isinstance(event.plan, dict):
            views.append((f"approval {event.gate}", event.plan))
    return views


def test_the_recorded_gate_views_read_back_to_the_same_json() -> None:
    views = recorded_views()
    assert {"gate_data", "gate_extract", "gate_train", "gate_deploy", "approval deploy"} <= {name for name, _ in views}
    for name, recorded in views:
        view = read_view(recorded)
        assert isinstance(view, GateView), name
        dumped = view.model_dump(mode="json")
        assert dumped == recorded, name
        assert json.dumps(dumped) == json.dumps(recorded), name  # in the same order, too


def test_the_deploy_gate_offers_only_its_own_answers_on_the_dashboard() -> None:
    recorded = next(view for name, view in recorded_views() if name == "gate_deploy")
    view = read_view(recorded)
    assert isinstance(view, GateView) and view.actions == ("approve", "reject")
    html = dashboard(view)
    assert 'value="approve"' in html and 'value="reject"' in html
    assert 'value="edit"' not in html and "edit sizes" not in html  # the deploy gate has nothing to edit
    shown = terminal(view)
    assert "evaluation mean acceptance length" in shown and "measure production" in shown
    assert "deploy server after: " in shown and "deploy server after: " in html
    # A deploy that cannot be made shows why, and no command, in both faces.
    refused = {key: value for key, value in recorded.items() if key != "production"}
    error = "the deploy cannot be made: <drop-in> exists"
    refused |= {"commands": [], "deploy": {**recorded["deploy"], "error": error}}
    view = read_view(refused)
    assert isinstance(view, GateView) and view.model_dump(mode="json") == refused
    assert "cannot deploy" in terminal(view) and "&lt;drop-in&gt; exists" in dashboard(view)
    assert "Exact commands" not in dashboard(view) and "will run" not in terminal(view)


def test_a_failure_view_reads_back_and_offers_retry_or_abort() -> None:
    recorded = {"kind": "failure", "phase": "train", "job_id": "r1.train", "status": "exited 1",
                "log_tail": "Traceback <module>\nOutOfMemoryError", "diagnosis": "Out of memory: retry smaller",
                "choices": ["retry", "abort"]}  # fmt: skip
    view = read_view(recorded)
    assert isinstance(view, FailureView) and view.model_dump(mode="json") == recorded
    html = dashboard(view)
    assert 'value="retry"' in html and 'value="abort"' in html and 'value="approve"' not in html
    assert '<pre class="log">Traceback &lt;module&gt;\nOutOfMemoryError</pre>' in html
    assert "<h2>Failure in phase train</h2>" in html and "Out of memory: retry smaller" in terminal(view)


def test_the_terminal_and_the_chat_show_a_failure_in_the_same_words(tmp_path: Path) -> None:
    failure = {"phase": "data", "job_id": "r1.generate", "status": "failed (rc 1)", "diagnosis": "Out of memory: retry",
               "log_tail": "Traceback <module>\nOutOfMemoryError"}  # fmt: skip
    run, _ = run_at_failure_gate(tmp_path / "runs", "failed", failure)
    host = HostConfig(address="local", python=sys.executable, workdir=str(tmp_path / "work"))
    config = EyasConfig(hosts={"local": host}, target=TargetConfig(base_url="http://127.0.0.1:9", model="target"))
    said = ChatPipeline(run, config).status()
    pending = read_run(run).pending
    assert pending is not None
    view = read_view(pending[1])
    assert isinstance(view, FailureView)
    shown = gate_text(view)
    assert f"waiting at the failure gate of data, which shows:\n{shown}" in said, said
    assert shown == (
        "failure in phase data\njob: r1.generate\nstatus: failed (rc 1)\ndiagnosis: Out of memory: retry\n"
        "log:\nTraceback <module>\nOutOfMemoryError"
    )
    assert words(terminal(view)) == words(shown)  # the panel's title and rows, word for word


def words(text: str) -> list[str]:
    """The words of a face's text, without its frame (a panel's box) or its punctuation between label and text."""
    return re.findall(r"[^\s:│─╭╮╰╯]+", text)


READY = {
    "source": "AQ-MedAI/Kimi-K2-Instruct-eagle3", "job_id": "r1.download", "format": "specforge",
    "fits": "fits /models/kimi: reads width 7168 (the target's 7168), vocabulary 163840 (the target's 163840), draft "
    "vocabulary 32000, layers [1, 29, 57] of the target's 61",
    "converted": "converted from specforge's format to speculators' (speculators mapping), loaded as training loads "
    "it: /work/runs/r1/drafter-base/speculators",
}  # fmt: skip


def test_the_data_gate_shows_the_drafter_made_ready_and_blocks_on_one_that_cannot_train(tmp_path: Path) -> None:
    """The drafter's preparation before the data gate leaves its outcome in the state (graph/phases/data/drafter.py;
    the real job: tests/integration/test_specforge.py): the run's first gate shows it in both faces, and a drafter
    that cannot be used blocks that gate, so no policy approves generation for it."""
    ctx = context(tmp_path, "")
    ctx.policy = Policy()
    ready = gate_view("data", {**STATE, "drafter": READY}, ctx, [job("r1.generate")])
    assert ready.drafter is not None and ready.drafter.format == "specforge" and not ready.blocked
    assert ready.policy is not None and ready.policy.approve, ready.policy
    for shown in (terminal(ready, width=1000), dashboard(ready)):
        assert "layers [1, 29, 57] of the target" in shown and "/work/runs/r1/drafter-base/speculators" in shown
    assert read_view(ready.model_dump(mode="json")) == ready
    # Shown once, at the run's first gate: the extraction gate after generation does not repeat it, but is the
    # first gate of a run that starts from existing data.
    generated = {**STATE, "drafter": READY, "jobs": {"data": ["r1.generate"]}, "artifacts": {"conversations": "c"}}
    assert gate_view("extract", generated, ctx, []).drafter is None
    from_data = {**STATE, "drafter": READY, "artifacts": {"conversations": "c"}}
    assert gate_view("extract", from_data, ctx, []).drafter is not None

    error = "The drafter in /d cannot be used for the target in /models/kimi: it reads hidden states of width 640."
    refused = {"source": "/d", "job_id": "r1.download", "error": error}
    blocked = gate_view("data", {**STATE, "drafter": refused}, ctx, [job("r1.generate")])
    assert blocked.blocked == [
        f"the drafter /d cannot be finetuned for this target: {error} Fix pipeline.drafter_base and start a new run; "
        "generation would be spent on a run whose training cannot start."
    ]
    assert blocked.policy is not None and not blocked.policy.approve
    for shown in (terminal(blocked, width=1000), dashboard(blocked)):
        assert "drafter refused" in shown and "width 640" in shown
    # Production down when the run verified: generation sends every request to it, so the gate says it waits for
    # production, and the policy does not approve generation (issue 38).
    down = {**STATE, "verification": {"health": {"status": "fail", "message": "Nothing accepts connections"}}}
    waiting = gate_view("data", down, ctx, [job("r1.generate")])
    assert waiting.policy is not None and not waiting.policy.approve
    assert "generation cannot run until production is up" in waiting.policy.reasons
    shown = " ".join(terminal(waiting, width=1000).split())
    assert "generation cannot run until production is up" in shown and "Nothing accepts connections" in shown
    assert gate_view("data", STATE, ctx, [job("r1.generate")]).policy.approve  # type: ignore[union-attr]
    # Verify passed the drafter on its config.json; its row says so and that the refusal since holds (issue 38:
    # "verify drafter: ok" stood directly above "drafter refused").
    verified = {"status": "ok", "message": "specforge drafter: reads width 7168"}
    checked = {**STATE, "drafter": refused, "verification": {**STATE["verification"], "drafter": verified}}
    rows = {
        line.label: line for section in gate_sections(gate_view("data", checked, ctx, [])) for line in section.lines
    }
    assert rows["verify drafter"].alarm and rows["verify drafter"].text.startswith(
        "ok at verify (specforge drafter: reads width 7168), which read only the config.json files; refused since"
    )

    # Without target.model_dir there is nothing to check it against or convert it with: refused before any job.
    ctx.config = ctx.config.model_copy(update={"pipeline": PipelineConfig(drafter_base="org/drafter")})
    state: RunState = {**STATE, "run_id": "r1"}
    state.update(prepare_drafter(state, Runtime(context=ctx)))  # type: ignore[typeddict-item]
    unset = gate_view("data", state, ctx, [])
    assert unset.drafter is not None and unset.drafter.error is not None and "target.model_dir" in unset.blocked[0]
    assert not (tmp_path / "work" / "jobs").exists()
