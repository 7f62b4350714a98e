"""The rehearsal host (tests/unit/test_rehearsal_plan.py) with production down: nothing answers at its base_url, as
while production is stopped for a phase or still loading its 594 GB. The plan still has every figure: the model from
target.model_dir (Kimi-K2.5's real `kimi_k25` wrapper config, its DeepSeek-V3 dims in text_config, the sparse
weights), and the rates assumed from the weights and the GPUs, which the sources say. Extraction is one forward pass
per sample, so its hours (and production's downtime for it, and online training's prefill) come from a prefill rate,
not the decoding rate: an order of magnitude fewer. The plan node, `eyas plan` and `eyas run --dry-run` are the
real ones; nvidia-smi is the stand-in of an 8-GPU host (no GPU here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from langgraph.runtime import Runtime
from test_rehearsal_plan import FIXTURES, SIZES, WEIGHTS, rehearsal_host

from eyas.graph.phases.plan.node import plan_node
from eyas.graph.state import run_plan
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.planning.estimate import GPU_DECODE_BYTES_PER_S, GPU_TRAINING_FLOPS, estimate
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.planning.model_config import MeasureError
from eyas.tools.planning.served import ServerDown
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.settings.units import format_hours, parse_size
from in_process import eyas
from model_shapes import KIMI_K25_CONFIG
from nvidia_smi_standin import install_nvidia_smi

LOAD_S = 1320  # the rehearsal config's target.load_time_s
TEXT = KIMI_K25_CONFIG["text_config"]
assert isinstance(TEXT, dict)
# What one token's forward pass multiplies by, counted here from the config's own keys: attention (4 h^2) and the MLP
# at the width of the 8 routed experts and the shared one, every layer; the lm_head.
H, LAYERS = TEXT["hidden_size"], TEXT["num_hidden_layers"]
ACTIVE = LAYERS * (4 * H * H + 3 * H * (8 + 1) * TEXT["moe_intermediate_size"]) + TEXT["vocab_size"] * H
OPERATOR = ["--samples", "25000", "--max-tokens", "4096", "--max-seq-len", "8192"]


@pytest.fixture
def down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rehearsal host's model directory with Kimi-K2.5's real wrapper config, and the 8-GPU nvidia-smi stand-in
    first on PATH; the server (http://127.0.0.1:9) refuses every connection."""
    model_dir = tmp_path / "Kimi-K2.5"
    rehearsal_host(tmp_path, parse_size("2.9TB"))  # makes the directory and its 594 GB of sparse weights
    (model_dir / "config.json").write_text(json.dumps(KIMI_K25_CONFIG))
    install_nvidia_smi(tmp_path / "bin", holder_pid=os.getpid())
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return model_dir


def expected_rates(sequence: float) -> tuple[float, float]:
    """Decoding and prefill tokens/s the plan assumes for this host: the run's default requests at once, each step
    reading 594 GB once from 8 GPUs; 8 GPUs' sustained FLOP/s over 2 per active parameter and the attention."""
    decode = DEFAULT_SIZES.concurrency * 8 * GPU_DECODE_BYTES_PER_S / WEIGHTS
    prefill = 8 * GPU_TRAINING_FLOPS / (2 * ACTIVE + 2 * LAYERS * H * sequence)
    return decode, prefill


def test_the_model_and_the_rates_come_from_the_model_directory_and_say_so(tmp_path: Path, down: Path) -> None:
    ctx, _ = rehearsal_host(tmp_path, parse_size("2.9TB"))
    figures = Figures(**planned_sizes(SIZES), free_disk_bytes=parse_size("2.9TB"))
    with pytest.raises(ServerDown, match=r"http://127\.0\.0\.1:9 did not answer"):
        measure_inputs(figures, config=ctx.config, host=LocalHost(), http=HttpClient())
    measured = measure_inputs(
        figures, config=ctx.config, host=LocalHost(), http=HttpClient(), server_down="production is stopped"
    )
    inputs, sources = measured.inputs, measured.sources
    model = inputs.model
    assert (model.hidden_size, model.num_layers, model.vocab_size) == (7168, 61, 163840)  # text_config's
    assert model.active_intermediate_size == 9 * 2048 and model.active_parameters() == ACTIVE
    assert model.default_max_model_len == 262144 and measured.weight_bytes == WEIGHTS
    assert measured.model_dir == str(down) and measured.context is not None and measured.context.tokens == 131072
    from_dir = f"local:{down}/config.json (target.model_dir: the server could not be asked, production is stopped)"
    assert sources["model"] == from_dir
    assert sources["max_model_len"] == "131,072 tokens: production's --max-model-len (its unit)"
    assert sources["prompt_tokens"].startswith("estimated, not tokenized (the server could not be asked): 32 prompts")

    decode, prefill = expected_rates(inputs.sequence_tokens)
    assert inputs.generation_tok_s == pytest.approx(decode) and inputs.extraction_tok_s == pytest.approx(prefill)
    assert sources["throughput"].startswith("assumed, not measured (the server could not be asked: production is")
    assert (
        f"{DEFAULT_SIZES.concurrency} requests at once, each decoding step reading the 594 GB of weights once from "
        "production's 8 GPU(s)" in (sources["throughput"])
    )
    assert sources["extraction"].startswith(f"assumed, not measured: prefill at {prefill:,.0f} tokens/s")
    assert "production's 8 GPU(s)" in sources["extraction"]
    assert measured.single_tok_s == pytest.approx(8 * GPU_DECODE_BYTES_PER_S / WEIGHTS)  # the evaluation, one at a time
    # Training happens on the 8 GPUs, in speculators' trainer: a window of 8 gives each one fetching worker.
    assert (inputs.train_gpus, inputs.online_window, inputs.online_dtype) == (8, 8, "bfloat16")

    plan = estimate(inputs)
    assert plan.generation_hours == pytest.approx(25_000 * 4096 / decode / 3600)
    assert plan.extraction_hours == pytest.approx(plan.total_tokens / prefill / 3600)
    # Prefill, not decoding: the pass over the same tokens at the decoding rate would take over twice as long, even
    # with the run's default requests at once (the more in flight, the closer decoding gets to prefill's rate).
    assert plan.extraction_hours * 2 < plan.total_tokens / decode / 3600
    assert plan.extraction_hours * 2 < plan.generation_hours


def test_the_plan_with_production_down_has_hours_a_disk_verdict_and_the_downtime(tmp_path: Path, down: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    del state["plan"]  # planned again, now by the plan node itself against the host
    notes: list[str] = []
    ctx.on_note = notes.append
    state["plan"] = plan_node(state, Runtime(context=ctx))["plan"]
    plan = run_plan(state)
    mode = plan.extraction_mode
    assert mode is not None and mode.mode == "hybrid" and plan.fits is True
    assert plan.verdict is not None and plan.verdict.startswith("Fits hybrid: 25,000 samples of ")
    assert "The server could not be asked (http://127.0.0.1:9 did not answer" in plan.verdict
    assert f"the model's shape and weights are from {down}" in plan.verdict
    assert "the decoding rate, prefill rate and prompt length are assumed, not measured" in plan.verdict
    assert plan.free_disk_bytes == parse_size("2.9TB") and plan.total_hours is not None
    for phase in ("data", "extract", "train", "evaluate"):
        assert plan.phase(phase).phase_hours is not None, phase
    assert plan.sources["throughput"].startswith("assumed, not measured") and "594 GB" in plan.sources["throughput"]

    # Production's downtime for each GPU phase: its hours, and the load it takes to come back once, after the last
    # phase of their one downtime window.
    # Extraction's own server and online training's load as production does: inside the window, each counted.
    load_h = LOAD_S / 3600
    extract_impact, train_impact = plan.production("extract"), plan.production("train")
    assert extract_impact is not None and extract_impact.action == "stop"
    assert plan.extraction is not None and plan.extraction.backend == "vllm"
    assert extract_impact.downtime_hours == pytest.approx(mode.extract_hours + load_h)
    assert train_impact is not None and train_impact.downtime_hours == pytest.approx(mode.train_hours + load_h)
    evaluate_impact = plan.production("evaluate")
    evaluate_hours = plan.phase("evaluate").phase_hours
    assert evaluate_impact is not None and evaluate_hours is not None
    assert evaluate_impact.downtime_hours == pytest.approx(evaluate_hours + LOAD_S / 3600)
    (window,) = plan.downtime_windows()
    assert window.downtime_hours == pytest.approx(mode.extract_hours + mode.train_hours + evaluate_hours + 3 * load_h)
    # One total: every phase as planned (the servers' loads included) and the deploy's restart of production.
    phase_hours = [plan.phase(phase).phase_hours for phase in ("data", "extract", "train", "evaluate")]
    assert plan.total_hours == pytest.approx(sum(h or 0.0 for h in phase_hours) + load_h)
    assert "Whole run: " in plan.verdict and "the deploy's restart of production 22 min" in plan.verdict
    # The prefill-based pass: the kept samples' extraction and the fetched ones' prefill every epoch, at the rate a
    # forward pass takes, not the decoding rate (at which this plan would budget over twice the downtime for it).
    data_hours, kept = plan.phase("data").phase_hours, mode.offline_samples
    assert data_hours is not None and kept is not None and mode.extract_hours * 2 < data_hours * kept / 25_000
    assert mode.online_hours == pytest.approx(mode.extract_hours / kept * mode.fetched * 3)
    assert extract_impact.downtime_hours is not None and extract_impact.downtime_hours < 2
    assert any(note.startswith("plan: Nothing accepts connections at http://127.0.0.1:9") for note in notes)


def rehearsal_config(tmp_path: Path, model_dir: Path, unit: Path = FIXTURES / "vllm_kimi.service") -> Path:
    config = tmp_path / "eyas.toml"
    config.write_text(
        f"""[hosts.gpu]
address = "local"
python = "/srv/vllm/.venv/bin/python"
workdir = "{tmp_path / "work"}"

[target]
host = "gpu"
base_url = "http://127.0.0.1:9"
model = "kimi-k2.5"
model_dir = "{model_dir}"
unit_file = "{unit}"
load_time_s = {LOAD_S}
"""
    )
    return config


def test_eyas_plan_and_the_dry_run_with_production_down(tmp_path: Path, down: Path) -> None:
    config = rehearsal_config(tmp_path, down)
    env = {"PATH": os.environ["PATH"], "EYAS_RUNS_DIR": str(tmp_path / "runs")}
    planned = eyas("plan", "--config", str(config), "--json", "--free-disk", "2.9TB", *OPERATOR, env=env)
    assert "Traceback" not in planned.output
    plan = json.loads(planned.stdout)
    # Exit 1, not 2: it does not fit. The hidden states do not fit the disk, and hybrid, which would, cannot run on
    # these 8 H100s: its extraction server with production's layout claims 0.92 of each GPU (as production's launch
    # does) and the trainer needs 24.9 GB beside it. So it is never chosen, nor offered as a way out; and the
    # shipped set's 313 prompts are too few for 25,000 samples.
    assert planned.code == 1 and plan["fits"] is False and plan["prompt_supply"]["enough"] is False, planned.output
    mode = plan["extraction_mode"]
    assert mode["mode"] == "offline" and plan["verdict"].startswith("Does not fit")
    assert mode["gpu_refusal"].startswith("the GPUs cannot hold online training even with production stopped")
    assert "8 GPU(s) x 78.7 GB) and the trainer 24.9 GB more on one GPU" in mode["gpu_refusal"]
    assert f"Not online or hybrid: {mode['gpu_refusal']}." in plan["verdict"]
    assert {way["kind"] for way in plan["alternatives"]} == {"fewer_samples", "shorter_samples", "other_path"}
    decode, prefill = expected_rates(plan["tokens_per_sample"])
    assert plan["generation_hours"] == pytest.approx(25_000 * 4096 / decode / 3600)
    assert plan["offline_extraction_hours"] == pytest.approx(plan["total_tokens"] / prefill / 3600)
    assert plan["offline_extraction_hours"] * 2 < plan["generation_hours"]
    # The chosen mode's hours (offline here), the extraction server's load as production's counted in them, and
    # one whole run: the same figure in the text and the JSON.
    assert plan["extraction_hours"] == pytest.approx(plan["offline_extraction_hours"] + LOAD_S / 3600)
    parts = ("generation_hours", "extraction_hours", "training_hours", "evaluation_hours")
    assert plan["total_hours"] == pytest.approx(sum(plan[part] for part in parts) + LOAD_S / 3600)
    assert f"Whole run: {format_hours(plan['total_hours'])} (" in plan["verdict"]
    assert plan["max_model_len"] == {"tokens": 131072, "source": "production's --max-model-len (its unit)"}
    assert plan["sources"]["extraction"].startswith("assumed, not measured: prefill at")
    assert "The server could not be asked" in plan["verdict"]
    # What the GPU phases mean for production, by the run's own plan code: one downtime window, whose load counts
    # once, on the evaluation, after which production starts again.
    production = plan["production"]
    (planned_window,) = production["downtime_windows"]
    assert planned_window["phases"] == ["extract", "train", "evaluate"] and planned_window["load_s"] == LOAD_S
    downs = {name: production["phases"][name]["downtime_hours"] for name in planned_window["phases"]}
    # Each phase's downtime is its hours in the chosen mode, extraction's server load included.
    assert downs["extract"] == pytest.approx(plan["extraction_hours"]) and downs["train"] == pytest.approx(
        plan["training_hours"]
    )
    assert downs["evaluate"] > LOAD_S / 3600 and planned_window["downtime_hours"] == pytest.approx(sum(downs.values()))
    table = eyas("plan", "--config", str(config), "--free-disk", "2.9TB", *OPERATOR, env=env).stdout
    assert "production downtime" in table and "22 min load counted once" in " ".join(table.split())

    walked = eyas("run", "--dry-run", "--json", "--config", str(config), *OPERATOR, env=env)
    # Exit 1: a run of this plan would stop at its data gate (the shipped prompts are too few), as the dry run says.
    assert walked.code == 1 and "Traceback" not in walked.output, walked.output
    walk = json.loads(walked.stdout)
    verdict = walk["plan"]["verdict"]
    assert verdict.startswith(("Fits", "Does not fit")), verdict  # a disk verdict, against this machine's free disk
    assert "The server could not be asked" in verdict and walk["plan"]["total_hours"] is not None
    phases = {phase["phase"]: phase for phase in walk["phases"]}
    for name in ("data", "extract", "train", "evaluate"):
        assert phases[name]["phase_hours"] is not None, name
    for name in ("extract", "train", "evaluate"):
        production = phases[name]["production"]
        assert production["action"] == "stop" and production["downtime_hours"] is not None, production
    # One window: the load counted once, on the evaluation, after which production starts again.
    assert phases["evaluate"]["production"]["downtime_hours"] >= LOAD_S / 3600
    (window,) = walk["plan"]["downtime_windows"]
    assert window["phases"] == planned_window["phases"] and window["load_s"] == LOAD_S
    hours = sum(phases[name]["phase_hours"] for name in window["phases"])
    assert window["downtime_hours"] == pytest.approx(hours + LOAD_S / 3600)
    assert walk["plan"]["production_load"] == {"load_s": float(LOAD_S), "source": "target.load_time_s in the config"}
    assert not (tmp_path / "runs").exists()  # nothing launched, no run folder


def test_without_target_model_dir_the_plan_says_how_to_give_the_model(tmp_path: Path, down: Path) -> None:
    ctx, _ = rehearsal_host(tmp_path, parse_size("2.9TB"))
    config = ctx.config.model_copy(update={"target": ctx.config.target.model_copy(update={"model_dir": None})})
    figures = Figures(**planned_sizes(SIZES), free_disk_bytes=parse_size("2.9TB"))
    with pytest.raises(MeasureError, match=r"set target\.model_dir to the model.s directory on local") as raised:
        measure_inputs(figures, config=config, host=LocalHost(), http=HttpClient(), server_down="it is stopped")
    assert "--hidden-size, --num-layers and --vocab-size" in str(raised.value)
    # Its shape given, the weights' size is still needed to assume a decoding rate: the flag that gives it is named.
    shaped = figures.model_copy(update={"hidden_size": 7168, "num_layers": 61, "vocab_size": 163840})
    with pytest.raises(MeasureError, match=r"the weights' size is unknown.*--throughput TOKENS_PER_S"):
        measure_inputs(shaped, config=config, host=LocalHost(), http=HttpClient(), server_down="it is stopped")


def test_a_prefill_rate_given_is_used_as_is_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    """Every figure given: no host is contacted (the config's is a TEST-NET address), and extraction runs at the
    --prefill-throughput given, not the decoding rate."""
    config = tmp_path / "eyas.toml"
    (tmp_path / "known_hosts").write_text("")
    config.write_text(
        f'[hosts.gpu]\naddress = "203.0.113.7"\nknown_hosts = "{tmp_path / "known_hosts"}"\n'
        'python = "/opt/venv/bin/python"\n'
        'workdir = "/data/eyas"\n\n[target]\nhost = "gpu"\nbase_url = "http://203.0.113.7:8000"\nmodel = "kimi"\n'
    )
    figures = ["--hidden-size", "7168", "--num-layers", "61", "--vocab-size", "163840", "--free-disk", "8TB"]
    figures += ["--throughput", "1500", "--prompt-tokens", "100", "--samples", "300", *OPERATOR[2:]]
    ran = eyas("plan", "--config", str(config), "--json", *figures, "--prefill-throughput", "30000")
    assert ran.code == 0, ran.output
    plan = json.loads(ran.stdout)
    assert plan["sources"]["extraction"] == "given" and plan["inputs"]["extraction_tok_s"] == 30000
    assert plan["extraction_hours"] == pytest.approx(300 * (100 + 4096) / 30000 / 3600)
    bad = eyas("plan", "--config", str(config), *figures, "--prefill-throughput", "nan")
    said = " ".join(bad.output.split())
    assert bad.code == 2 and "--prefill-throughput is nan, and should be a finite number" in said
