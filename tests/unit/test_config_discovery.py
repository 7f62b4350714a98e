"""Which config a command acts on: --config, then $EYAS_CONFIG, then ./eyas.toml, then the embedded default,
each step with real files; the commands say which one in a line of their own, and `eyas config init` writes
the example to start from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eyas.agents.faces.cli.main import app
from eyas.tools.config_source import find_config, locate_config
from eyas.tools.errors import ConfigError, EyasError
from eyas.tools.target.embedded import SERVED_MODEL

REPO = Path(__file__).resolve().parents[2]
EYAS = Path(sys.executable).parent / "eyas"


def write_config(path: Path, model: str) -> Path:
    """A valid config on this machine whose target model names where it was found."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[hosts.local]\naddress = "local"\npython = "/usr/bin/python3"\nworkdir = "/tmp/eyas-test"\n\n'
        f'[target]\nbase_url = "http://127.0.0.1:9"\nmodel = "{model}"\n'
    )
    return path


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, and no $EYAS_CONFIG (conftest removes the developer's)."""
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    return here


def test_nothing_found_means_the_embedded_default(cwd: Path) -> None:
    config, source = find_config(None)
    assert source.path is None and config.target.model == SERVED_MODEL
    assert source.describe() == (
        f"config: the embedded default ({SERVED_MODEL} on this machine; no --config, $EYAS_CONFIG or ./eyas.toml)"
    )


def test_eyas_toml_in_the_current_directory_beats_the_embedded_default(cwd: Path) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    config, source = find_config(None)
    assert config.target.model == "from-cwd"
    assert source.describe() == "config: ./eyas.toml (found in the current directory)"


def test_eyas_config_beats_the_current_directory(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    named = write_config(cwd.parent / "elsewhere" / "prod.toml", "from-env")
    monkeypatch.setenv("EYAS_CONFIG", str(named))
    config, source = find_config(None)
    assert config.target.model == "from-env"
    assert source.describe() == f"config: {named} (from $EYAS_CONFIG)"


def test_an_empty_eyas_config_counts_as_unset(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    monkeypatch.setenv("EYAS_CONFIG", "")
    assert find_config(None)[0].target.model == "from-cwd"


def test_the_flag_beats_everything(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    monkeypatch.setenv("EYAS_CONFIG", str(write_config(cwd.parent / "env.toml", "from-env")))
    flag = write_config(cwd / "configs" / "flag.toml", "from-flag")
    config, source = find_config(Path("configs/flag.toml"))
    assert config.target.model == "from-flag" and source.path is not None and source.path.resolve() == flag
    assert source.describe() == "config: configs/flag.toml (from --config)"


def test_a_missing_file_named_by_the_flag_or_the_variable_is_an_error_not_a_fallback(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    with pytest.raises(ConfigError) as flagged:
        locate_config(Path("typo.toml"))
    message = str(flagged.value)
    assert message.startswith("--config names typo.toml, which does not exist.")
    assert "drop --config" in message and "`eyas config init typo.toml`" in message
    monkeypatch.setenv("EYAS_CONFIG", str(cwd / "gone.toml"))
    with pytest.raises(ConfigError, match=r"^\$EYAS_CONFIG names .*gone\.toml, which does not exist\. .*unset it"):
        locate_config(None)
    with pytest.raises(ConfigError, match="a directory, not a config file"):
        locate_config(cwd)


def test_config_check_says_which_file_it_checks(cwd: Path) -> None:
    write_config(cwd / "eyas.toml", "from-cwd")
    result = CliRunner().invoke(app, ["config", "check"])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == "config: ./eyas.toml (found in the current directory)"
    assert "eyas.toml is valid" in result.stdout


def test_plan_json_stays_json_with_the_source_line_on_stderr(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = write_config(cwd.parent / "env.toml", "from-env")
    monkeypatch.setenv("EYAS_CONFIG", str(named))
    figures = ["--hidden-size", "576", "--num-layers", "30", "--vocab-size", "49152", "--free-disk", "1TB"]
    figures += ["--samples", "300"]  # what the config's default source (the shipped set) holds: a plan that works
    result = CliRunner().invoke(app, ["plan", "--json", *figures, "--throughput", "100", "--prompt-tokens", "50"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data_path"] == "/tmp/eyas-test"  # the workdir of the config from $EYAS_CONFIG
    assert result.stderr.strip() == f"config: {named} (from $EYAS_CONFIG)"


def test_a_missing_config_is_one_paragraph_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "EYAS_CONFIG": str(tmp_path / "missing.toml"), "COLUMNS": "400"}
    result = subprocess.run(
        [str(EYAS), "verify"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: $EYAS_CONFIG names {tmp_path / 'missing.toml'}, which does not exist. Point $EYAS_CONFIG at an "
        "existing config file, or unset it to use ./eyas.toml or, without that, the embedded default. "
        f"`eyas config init {tmp_path / 'missing.toml'}` writes an example config there to edit."
    ]


def test_config_init_writes_the_example_and_refuses_to_overwrite(cwd: Path) -> None:
    example = (REPO / "eyas.example.toml").read_text()
    runner = CliRunner()
    first = runner.invoke(app, ["config", "init"])
    assert first.exit_code == 0, first.output
    assert (cwd / "eyas.toml").read_text() == example
    assert "Next, edit it" in first.stdout and "`eyas config check` and `eyas verify`" in first.stdout
    assert "in [hosts.gpu] the address" in first.stdout and "remove [agent]" in first.stdout  # not taken as markup

    (cwd / "eyas.toml").write_text("# mine\n")
    again = runner.invoke(app, ["config", "init"])
    assert isinstance(again.exception, EyasError) and "pass --force" in str(again.exception)
    assert (cwd / "eyas.toml").read_text() == "# mine\n"
    forced = runner.invoke(app, ["config", "init", "--force"])
    assert forced.exit_code == 0 and (cwd / "eyas.toml").read_text() == example

    elsewhere = runner.invoke(app, ["config", "init", "deploy/prod.toml"])
    assert elsewhere.exit_code == 0 and (cwd / "deploy" / "prod.toml").read_text() == example
    assert "`eyas config check deploy/prod.toml` and `eyas verify --config deploy/prod.toml`" in elsewhere.stdout
