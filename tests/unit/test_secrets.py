"""Secrets stay out of every output, state file and host command line: each route the issue found, closed
and checked on real processes and real files (the eyas CLI, a detached job seen through `ps`)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eyas.graph.phases.data.jobs import GenerationSettings, generation_sizes, generation_spec
from eyas.graph.runs import RunDir
from eyas.graph.state import GateAnswer
from eyas.tools.errors import ConfigError
from eyas.tools.hosts.host import CommandResult
from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobStatus
from eyas.tools.launch.api_key import configured_key
from eyas.tools.settings.config import HostConfig, TargetConfig, load_config
from eyas.tools.settings.sizes import DEFAULT_SIZES
from planted_secrets import API_KEY_FLAG, JWT, PLANTED, SLACK_BOT, URL_PASSWORD
from waiting import wait_for

EYAS = str(Path(sys.executable).parent / "eyas")
ALL = [planted.secret for planted in PLANTED]


def found_in(text: str) -> list[str]:
    """The planted secrets in `text`, also inside base64 (job scripts travel base64-encoded)."""
    encoded = [base64.b64encode(secret.encode()).decode()[:16] for secret in ALL]
    return [secret for secret, b64 in zip(ALL, encoded, strict=True) if secret in text or b64 in text]


CONFIG = """
[hosts.local]
address = "local"
python = "{python}"
workdir = "{workdir}"

[target]
base_url = "{base_url}"
model = "m"
api_key_env = "EYAS_TEST_LEAK_KEY"
"""


def write_config(tmp_path: Path, base_url: str = "http://127.0.0.1:9") -> Path:
    path = tmp_path / "eyas.toml"
    path.write_text(CONFIG.format(python=sys.executable, workdir=tmp_path, base_url=base_url))
    return path


@pytest.mark.parametrize(
    "base_url", [f"http://eyas:{URL_PASSWORD}@127.0.0.1:8000", "https://tok3nOnlyValue42@gpu.example.com"]
)
def test_credentials_in_a_url_are_refused_with_a_pointer_to_the_env_fields(tmp_path: Path, base_url: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(write_config(tmp_path, base_url))
    message = str(error.value)
    assert "target.base_url: holds credentials" in message and "api_key_env" in message
    assert URL_PASSWORD not in message and "tok3nOnlyValue42" not in message


def unit_file(tmp_path: Path) -> Path:
    """A unit file the way operators write them: tokens in Environment=, the key on the command line."""
    path = tmp_path / "vllm.service"
    env = "\n".join(f'Environment="{p.carrier}"' for p in PLANTED if re.match(r"[A-Z_]+=", p.carrier))
    path.write_text(
        f"[Service]\n{env}\nEnvironment=SLACK={SLACK_BOT}\nEnvironment=ID_TOKEN={JWT}\n"
        f"ExecStart=/opt/venv/bin/python -m vllm.entrypoints.openai.api_server --model m --port 9 "
        f"--api-key {API_KEY_FLAG}\n"
    )
    return path


@pytest.mark.parametrize("output", ["table", "json"])
def test_verify_prints_no_secret_of_the_unit_file_or_the_environment(tmp_path: Path, output: str) -> None:
    config = write_config(tmp_path)
    args = [EYAS, "verify", "--config", str(config), "--check", "service", "--unit-file", str(unit_file(tmp_path))]
    env = {**os.environ, "EYAS_TEST_LEAK_KEY": "plain-configured-key-31337", "COLUMNS": "400"}
    done = subprocess.run(
        [*args, *(["--json"] if output == "json" else [])], env=env, capture_output=True, text=True, timeout=120
    )
    printed = done.stdout + done.stderr
    assert "service" in done.stdout, printed
    planted_in_unit = [p.secret for p in PLANTED if re.match(r"[A-Z_]+=", p.carrier)] + [SLACK_BOT, JWT, API_KEY_FLAG]
    assert [secret for secret in planted_in_unit if secret in printed] == [], printed


def test_a_gate_reason_is_redacted_before_it_reaches_answers_jsonl(tmp_path: Path) -> None:
    reason = "; ".join(planted.carrier for planted in PLANTED)
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    run.record_answer("data", GateAnswer(action="reject", reason=reason))
    assert found_in(run.answers.read_text()) == []
    answer = run.answer_for("data")
    assert answer is not None and answer.reason.startswith("SLACK_BOT=[REDACTED")


class CommandLog(LocalHost):
    """The real local host, keeping every command it was asked to run (what `ps` would show of them)."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[str] = []

    def run(self, command: str, *, timeout: float = 60.0) -> CommandResult:
        self.commands.append(command)
        return super().run(command, timeout=timeout)


def test_a_jobs_api_key_reaches_it_by_file_never_through_ps_or_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "plain-api-key-not-shaped-8812"
    monkeypatch.setenv("EYAS_TEST_LEAK_KEY", key)
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    host = CommandLog()
    host_config = HostConfig(address="local", python="/bin/sh", workdir=str(tmp_path))
    target = TargetConfig(base_url="http://127.0.0.1:9", model="m", api_key_env="EYAS_TEST_LEAK_KEY")
    settings = GenerationSettings(
        input="/dev/null", output=str(tmp_path / "out.jsonl"), **generation_sizes(DEFAULT_SIZES)
    )
    spec = generation_spec("gen", host_config, target, str(tmp_path), settings, configured_key(target))
    # The "workload": hashes the key it was given, then holds until the test opens the FIFO.
    script = tmp_path / "generate.py"
    script.write_text(f'printf %s "$EYAS_TEST_LEAK_KEY" | sha256sum > {tmp_path}/got; cat {fifo} > /dev/null\n')
    jobs = Jobs(host, str(tmp_path))
    jobs.launch(spec)
    wait_for(lambda: (tmp_path / "got").exists(), 30, what="the job to start")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    with fifo.open("w"):
        pass
    wait_for(lambda: jobs.status("gen").finished, 30, what="the job to end")
    assert jobs.status("gen").status is JobStatus.SUCCEEDED
    assert key not in ps and not any(key in command for command in host.commands)
    assert not any(base64.b64encode(key.encode()).decode()[:12] in command for command in host.commands)
    assert (tmp_path / "got").read_text().split()[0] == hashlib.sha256(key.encode()).hexdigest()
    directory = tmp_path / "jobs" / "gen"
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "secrets.env").stat().st_mode & 0o777 == 0o600
    assert key not in (directory / "run.sh").read_text() + (directory / "job.json").read_text()


@pytest.mark.parametrize(
    ("command", "secret"),
    [
        (f'curl -H "Authorization: Bearer {JWT}" https://hooks.example.com/eyas', JWT),
        (
            "curl -d @- https://hooks.slack.com/services/T0ABC1DEF/B0ABC1DEF/abcdefghijklmnopqrstuvwx",
            "abcdefghijklmnopqrstuvwx",
        ),
        (f"curl -d @- 'https://notify.example.com/hook?token={SLACK_BOT}'", SLACK_BOT),
        ("curl -u eyas:pa55word -d @- https://ntfy.example.com/eyas", "pa55word"),
        ("MY_SECRET_THING=s3cr3tValue /usr/local/bin/notify-eyas", "s3cr3tValue"),
        ("mysql -h db -u eyas -pS3cretPw -e 'INSERT INTO notices VALUES (1)' ops", "S3cretPw"),
    ],
)
def test_a_notify_command_holding_a_token_is_refused_with_the_environment_variable_fix(
    tmp_path: Path, command: str, secret: str
) -> None:
    """The policy is stored in run.json and shown with every gate: a token written into notify_command would be too."""
    from eyas.graph.policy import load_policy

    path = tmp_path / "policy.toml"
    path.write_text(f"notify_command = {json.dumps(command)}\n")
    with pytest.raises(ConfigError) as refused:
        load_policy(path)
    text = str(refused.value)
    assert "looks like a secret" in text and "$NOTIFY_TOKEN" in text
    assert secret not in text
    path.write_text("notify_command = 'curl -H \"Authorization: Bearer $NOTIFY_TOKEN\" https://hooks.example.com'\n")
    assert load_policy(path).notify_command is not None  # the fix it names is accepted
