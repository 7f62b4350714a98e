"""`eyas verify` and the chat's verify tool check the drafter the run will finetune (pipeline.drafter_base), as the
pipeline's verify node does: one builder (tools/checks/result.config_checks) makes the context for all three.

Real parts: the CLI through typer, the operator tool as the agent calls it, the local host reading the two
config.json files this test writes (a drafter directory and a target model directory)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from eyas.agents.faces.cli.main import app
from eyas.agents.operator_tools import OperatorEnv, Verify, operator_tools
from eyas.agents.structured import tool_name
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import load_config

SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "num_hidden_layers": 30, "vocab_size": 49152}


def speculators_drafter(directory: Path, width: int) -> Path:
    """A speculators-format drafter's config.json: what the drafter check reads."""
    directory.mkdir(parents=True)
    config = {"speculators_model_type": "eagle3", "draft_vocab_size": 256,
              "eagle_aux_hidden_state_layer_ids": [2, 15, 27],
              "transformer_layer_config": {"hidden_size": width, "vocab_size": 49152}}  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def config_file(tmp_path: Path, drafter: Path) -> Path:
    target = tmp_path / "target"
    target.mkdir(exist_ok=True)
    (target / "config.json").write_text(json.dumps(SMOLLM2))
    path = tmp_path / f"{drafter.name}.toml"
    path.write_text(
        f'[hosts.local]\naddress = "local"\npython = "{sys.executable}"\nworkdir = "{tmp_path}"\n\n'
        f'[target]\nhost = "local"\nbase_url = "http://127.0.0.1:9"\nmodel = "m"\nmodel_dir = "{target}"\n\n'
        f'[pipeline]\ndrafter_base = "{drafter}"\n'
    )
    return path


def test_eyas_verify_checks_the_configured_drafter(tmp_path: Path) -> None:
    fitting = config_file(tmp_path, speculators_drafter(tmp_path / "fits", 576))
    verified = CliRunner().invoke(app, ["verify", "--config", str(fitting), "--check", "drafter", "--json"])
    assert verified.exit_code == ExitCode.OK, verified.output
    row = json.loads(verified.stdout)[0]
    assert row["name"] == "drafter" and row["status"] == "ok" and row["facts"]["path"] == str(tmp_path / "fits")
    assert "reads width 576" in row["message"]

    wide = config_file(tmp_path, speculators_drafter(tmp_path / "wide", 640))
    refused = CliRunner().invoke(app, ["verify", "--config", str(wide), "--check", "drafter"])
    assert refused.exit_code == ExitCode.NO and "width 640, the target's are 576" in refused.output

    # The full check set includes it too, not only when asked by name.
    everything = CliRunner().invoke(app, ["verify", "--config", str(wide), "--json"])
    assert "drafter" in [row["name"] for row in json.loads(everything.stdout)]


def test_the_chat_verify_tool_checks_the_configured_drafter(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, speculators_drafter(tmp_path / "wide", 640)))
    env = OperatorEnv(config, lambda name: LocalHost(), HttpClient(), SYSTEM_CLOCK)
    verify = next(tool for tool in operator_tools(env) if tool_name(tool.model) == "verify")
    said = verify.run(Verify(checks=["drafter"]))
    assert said.startswith(f"drafter: fail: drafter_base {tmp_path / 'wide'} cannot be used"), said
    assert "width 640" in said
