"""The config file: valid files load, every problem is reported with its field path."""

from pathlib import Path

import pytest

from eyas.tools.errors import ConfigError
from eyas.tools.settings.config import config_problems, load_config, secret_values
from eyas.tools.target.embedded import EmbeddedTarget

REPO = Path(__file__).resolve().parents[2]

VALID = """
[hosts.box]
address = "127.0.0.1"
user = "root"
known_hosts = "{known_hosts}"
python = "/opt/ml/bin/python"
workdir = "/data/eyas"

[target]
host = "box"
base_url = "http://127.0.0.1:8000/"
model = "m"
api_key_env = "EYAS_TEST_TARGET_KEY"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eyas.toml"
    path.write_text(text)
    return path


def test_valid_file_loads_and_normalises(tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    config = load_config(write(tmp_path, VALID.format(known_hosts=known_hosts)))
    assert config.host().address == "127.0.0.1"
    assert config.target.base_url == "http://127.0.0.1:8000"  # trailing slash removed


def test_example_config_is_valid_apart_from_its_local_files(tmp_path: Path) -> None:
    """The shipped example parses; only files that exist on the author's machine are reported missing."""
    problems = config_problems(REPO / "eyas.example.toml")
    assert all(problem.startswith(("hosts.gpu.key_file", "hosts.gpu.known_hosts")) for problem in problems)


def test_every_problem_is_reported_with_its_field_path(tmp_path: Path) -> None:
    text = """
[hosts.box]
address = "10.0.0.1"
port = 70000
python = "venv/bin/python"
workdir = "/data"
colour = "blue"

[target]
host = "gpu"
base_url = "localhost:8000"
"""
    problems = config_problems(write(tmp_path, text))
    joined = "\n".join(problems)
    assert "hosts.box.port: Input should be less than or equal to 65535" in joined
    assert "hosts.box.python: must be an absolute path on the host, got 'venv/bin/python'" in joined
    assert "hosts.box.colour: unknown field" in joined
    assert "target.base_url: must start with http:// or https://" in joined
    assert "target.model: Field required" in joined
    assert len(problems) == 5


def test_target_host_must_be_defined(tmp_path: Path) -> None:
    text = VALID.format(known_hosts="/nonexistent").replace('host = "box"', 'host = "elsewhere"')
    problems = config_problems(write(tmp_path, text))
    assert any("target.host names 'elsewhere', which is not in [hosts] (defined: box)" in p for p in problems)


def test_missing_known_hosts_says_how_to_record_the_key(tmp_path: Path) -> None:
    problems = config_problems(write(tmp_path, VALID.format(known_hosts=tmp_path / "absent")))
    assert problems == [
        f"hosts.box.known_hosts: {tmp_path / 'absent'} does not exist; record the host's key with "
        f"ssh-keyscan -p 22 127.0.0.1 >> {tmp_path / 'absent'}"
    ]


def test_malformed_toml_names_the_line(tmp_path: Path) -> None:
    problems = config_problems(write(tmp_path, "[hosts.box\naddress = 1\n"))
    assert len(problems) == 1 and "not valid TOML" in problems[0] and "line 1" in problems[0]


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.toml")


def test_secrets_come_from_the_environment_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    config = load_config(write(tmp_path, VALID.format(known_hosts=known_hosts)))
    assert secret_values(config) == []
    monkeypatch.setenv("EYAS_TEST_TARGET_KEY", "sk-test-123")
    assert secret_values(config) == ["sk-test-123"]
    # A key file's passphrase is a secret too, wherever a host names it.
    box = config.hosts["box"].model_copy(update={"key_passphrase_env": "EYAS_TEST_PASSPHRASE"})
    monkeypatch.setenv("EYAS_TEST_PASSPHRASE", "correct horse")
    with_passphrase = config.model_copy(update={"hosts": {"box": box}})
    assert secret_values(with_passphrase) == ["sk-test-123", "correct horse"]


def test_embedded_default_needs_no_file(tmp_path: Path) -> None:
    config = EmbeddedTarget(tmp_path, port=9999).config()
    assert config.host().is_local
    assert config.target.base_url == "http://127.0.0.1:9999"
    assert config.target.unit_file == str(tmp_path / "work" / "eyas-target-9999.service")
