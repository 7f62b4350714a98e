"""The plan chooses the extraction backend and says why at the extraction gate; a phase whose path cannot work on
the host is shown blocked, with the minimum versions, and is never launched.

The GPU host is the motivating one: Kimi-K2's config.json, its 8-GPU unit file (tensor-parallel 8), and a
STAND-IN for nvidia-smi (no GPU here; tests/support/nvidia_smi_standin.py prints a real 8 x H100 host's CSV). The CPU
host is this machine with the embedded SmolLM2 (no nvidia-smi: the real gpus check finds none). The older
version set is the compat probe's answer as vLLM 0.10.1 and speculators 0.1.0 give it (tests/integration/test_compat.py
probes that stack for real); the graph runs in-process as in tests/integration/test_gates.py.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from extraction import prepared_target
from eyas.agents.faces.cli.run_ui import gate_panel
from eyas.agents.faces.dashboard.views import gate_body
from eyas.agents.faces.gate_text import paths_lines
from eyas.graph.context import RunContext
from eyas.graph.gates.view import GateView, gate_view
from eyas.graph.life.runner import drive, thread
from eyas.graph.phases.extract import node as extract
from eyas.graph.phases.plan.node import checked_paths, production_plan
from eyas.graph.phases.verify.node import gpu_summary
from eyas.graph.pipeline import build_graph
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer, RunState
from eyas.tools.checks.compat import judge
from eyas.tools.checks.result import CheckContext
from eyas.tools.checks.verify import verify
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.model_config import read_model_dims
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEMO, Sizes
from gpu_host import without_a_gpu
from nvidia_smi_standin import FIXTURES, install_nvidia_smi

KIMI_CONFIG = {"hidden_size": 7168, "num_hidden_layers": 61, "vocab_size": 163840, "intermediate_size": 18432}
# What compat_probe.py answers on vLLM 0.10.1 with speculators 0.1.0 (no extract_hidden_states, no last layer,
# no Eagle3DraftModel).
OLD_FEATURES = {
    "transformers_causal_lm": True, "extract_hidden_states": False, "eagle3_method": True,
    "last_layer_capture": False, "speculators_eagle3": False, "speculators_trainer": False,
    "speculators_converter": False, "torchrun": True, "cuda": False,
}  # fmt: skip
OLD_VERSIONS = {"vllm": "0.10.1", "speculators": "0.1.0", "transformers": "4.56.0", "torch": "2.8.0"}


def context(config: EyasConfig, tmp_path: Path, policy: Policy | None = None) -> RunContext:
    return RunContext(
        config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(tmp_path / "runs" / "r1"),
        policy=policy,
    )  # fmt: skip


def planned(ctx: RunContext, state: RunState) -> RunState:
    """The state after verify's gpus check and the plan's GPU budget and backend choice (no server measured)."""
    checks = CheckContext(ctx.host, ctx.host_config, ctx.config.target, ctx.http, ctx.host_config.workdir)
    state["gpus"] = gpu_summary(verify(checks, ["gpus"]).results[0].facts)
    assert ctx.config.target.model_dir is not None
    dims = read_model_dims(ctx.host, f"{ctx.config.target.model_dir}/config.json")
    production = production_plan(ctx, state, dims, {}, None)
    phases = {phase: {"production": impact} for phase, impact in production["phases"].items()}
    state["plan"] = {**checked_paths(state, production), "phases": phases}
    return state


def extraction_gate(ctx: RunContext, state: RunState) -> dict[str, Any]:
    """The extraction gate's view as the gate stores it (plain JSON)."""
    return gate_view("extract", state, ctx, extract.build_jobs(ctx, state)).model_dump(mode="json")


def test_a_model_larger_than_one_gpu_is_extracted_by_vllm_with_production_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = tmp_path / "Kimi-K2-Instruct"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(KIMI_CONFIG))
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python="/srv/vllm/.venv/bin/python", workdir=str(tmp_path / "w"))},
        target=TargetConfig(
            base_url="http://127.0.0.1:9", model="kimi-k2", model_dir=str(model_dir),
            unit_file=str(FIXTURES / "vllm_kimi.service"), load_time_s=1320,
        ),
    )  # fmt: skip
    ctx = context(config, tmp_path)
    state = planned(ctx, {"sizes": Sizes().model_dump(), "artifacts": {"conversations": "/data/c.jsonl"}})
    assert state["gpus"]["count"] == 8

    view = extraction_gate(ctx, state)
    assert view["extraction"]["backend"] == "vllm" and view["extraction"]["requested"] == "auto"
    # One sentence with the numbers: the dense estimate of Kimi-K2's weights with workspace against an H100.
    assert view["extraction"]["reason"] == (
        "vllm: the model needs 97.7 GB with its workspace, more than the largest GPU's 85.5 GB, so it is served "
        "with production's layout (tensor 8 x pipeline 1 = 8 GPU(s))"
    )
    assert ("extraction backend", view["extraction"]["reason"]) in paths_lines(GateView.model_validate(view))
    (command,) = view["commands"]
    assert "--backend vllm" in command and '"--tensor-parallel-size", "8"' in command


@pytest.fixture
def smol(tmp_path: Path) -> RunContext:
    target = prepared_target()
    return context(target.config(), tmp_path)


@pytest.mark.slow  # smol: the embedded target's venv and model (`make target`)
@without_a_gpu
def test_smollm2_on_a_cpu_host_is_extracted_by_hf_and_an_edit_can_choose_vllm(smol: RunContext) -> None:
    state = planned(smol, {"sizes": DEMO.model_dump(), "artifacts": {"conversations": "/data/c.jsonl"}})
    assert state["gpus"]["count"] == 0  # the real gpus check: no nvidia-smi on this machine
    view = extraction_gate(smol, state)
    assert view["extraction"] == {
        "backend": "hf", "requested": "auto",
        "reason": "hf: the host has no GPU, so transformers runs the 0.4 GB model on the CPU with no server to start",
    }  # fmt: skip
    assert "--backend hf" in view["commands"][0]
    assert view["sizes"]["extraction_backend"] == "auto"  # shown, and editable like every size

    # The operator edits the size at the gate: the re-plan takes it, and says what it would have chosen.
    edited = planned(smol, {"sizes": {**DEMO.model_dump(), "extraction_backend": "vllm"}, "artifacts": {}})
    view = extraction_gate(smol, edited)
    assert view["extraction"]["backend"] == "vllm" and view["extraction"]["requested"] == "vllm"
    assert view["extraction"]["reason"].startswith("vllm: the run's size extraction_backend asks for it (the plan ")
    assert "--backend vllm" in view["commands"][0] and "blocked" not in view  # compat not known: nothing blocks


def old_stack(state: RunState) -> RunState:
    """The state as verify leaves it on the older version set."""
    rows = judge({"features": OLD_FEATURES})
    state["compat"] = {"versions": OLD_VERSIONS, "table": [row.model_dump() for row in rows]}
    return state


@pytest.mark.slow  # smol: the embedded target's venv and model (`make target`)
def test_an_older_stack_blocks_the_phases_whose_paths_it_lacks_and_names_the_minimum_versions(
    smol: RunContext,
) -> None:
    sizes = {**DEMO.model_dump(), "extraction_backend": "vllm"}
    state = planned(smol, old_stack({"sizes": sizes, "artifacts": {"conversations": "/data/c.jsonl"}}))
    paths = state["plan"]["paths"]
    assert paths["extract"]["path"] == "vllm" and paths["evaluate"]["blocked"] is None
    assert paths["extract"]["blocked"] == (
        "extract (vllm) cannot work on this host: it needs vLLM's extract_hidden_states speculative method, from "
        "vllm 0.18 (added by vllm#33736; in use on 0.18.0 in vllm#39017); it needs the target architecture's vLLM "
        "model class to hand out its last layer as an aux state, from the vLLM release whose model class for the "
        "architecture has it, probed on the host (DeepSeek family: vllm#46788) (installed: vllm 0.10.1, "
        "speculators 0.1.0, transformers 4.56.0, torch 2.8.0)"
    )
    train = paths["train"]["blocked"]
    assert "speculators' Eagle3DraftModel" in train and "speculators 0.9" in train

    view = extraction_gate(smol, state)
    assert view["blocked"] == [paths["extract"]["blocked"]]
    typed = GateView.model_validate(view)
    assert ("BLOCKED", paths["extract"]["blocked"]) in paths_lines(typed)
    # Shown in the terminal and on the dashboard.
    console = Console(record=True, width=400)
    console.print(gate_panel(typed))
    shown = console.export_text()
    assert "BLOCKED" in shown and "from vllm 0.18" in shown
    assert f'<span class="error">{html.escape(paths["extract"]["blocked"])}</span>' in gate_body(typed)
    # The same stack with the plan's own choice: hf works, so extraction is not blocked; training still is.
    chosen = planned(smol, old_stack({"sizes": DEMO.model_dump(), "artifacts": {}}))
    assert chosen["plan"]["extraction"]["backend"] == "hf" and chosen["plan"]["paths"]["extract"]["blocked"] is None
    assert gate_view("train", chosen, smol, []).blocked == [chosen["plan"]["paths"]["train"]["blocked"]]
    # The data gate, first, already says what will stop the run later.
    data = gate_view("data", chosen, smol, [])
    assert "blocked" not in data.model_dump(mode="json")
    assert data.blocked_later == [chosen["plan"]["paths"]["train"]["blocked"]]
    assert ("blocked later", data.blocked_later[0]) in paths_lines(data)


@pytest.mark.slow  # smol: the embedded target's venv and model (`make target`)
def test_a_blocked_phase_is_never_launched_whoever_approves(smol: RunContext, tmp_path: Path) -> None:
    """A policy does not approve it; an operator's approval ends the run with the reason, nothing launched."""
    sizes = {**DEMO.model_dump(), "extraction_backend": "vllm"}
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text("")
    state = planned(smol, old_stack({"sizes": sizes, "artifacts": {"conversations": str(conversations)}}))
    blocked = state["plan"]["paths"]["extract"]["blocked"]
    start = {**state, "run_id": "r1", "verification": {}, "decisions": []}

    smol.policy = Policy()
    view = extraction_gate(smol, start)  # type: ignore[arg-type]
    assert view["policy"]["approve"] is False and view["policy"]["reasons"].startswith(f"cannot run here: {blocked}")

    smol.policy = None
    graph = build_graph(InMemorySaver())
    seen: list[dict[str, Any]] = []

    def approve(view: dict[str, Any], elsewhere: object) -> GateAnswer:
        seen.append(view)
        return GateAnswer(action="approve", reason="go")

    graph.update_state(thread(smol.run), start, as_node="plan")
    outcome = drive(graph, smol, None, ask=approve, on_update=lambda update: None)
    assert [view["phase"] for view in seen] == ["extract"] and seen[0]["blocked"] == [blocked]
    assert outcome.finished and "jobs" not in outcome.state  # nothing launched
    assert outcome.state["decisions"][-1]["action"] == "approve"
    assert outcome.state["stopped"].startswith("the extract phase was approved but cannot run on this host, so ")
    assert blocked in outcome.state["stopped"]


@pytest.mark.slow  # smol: the embedded target's venv and model (`make target`)
def test_the_research_summary_is_a_short_section_of_the_gate(smol: RunContext) -> None:
    state = planned(smol, {"sizes": DEMO.model_dump(), "artifacts": {"conversations": "/data/c.jsonl"}})
    state["research_summary"] = {
        "summary": "Train EAGLE-3 with speculators [1].",
        "checks": ["--speculative-config: in `python -m vllm.entrypoints.openai.api_server --help=all`",
                   "--num-lookahead-slots: NOT in the installed --help"],
        "path": "/runs/r1/research.md",
    }  # fmt: skip
    rows = paths_lines(gate_view("data", state, smol, []))
    assert ("research", "Train EAGLE-3 with speculators [1].") in rows
    assert ("research claim", "--num-lookahead-slots: NOT in the installed --help") in rows
    assert ("research report", "/runs/r1/research.md") in rows
