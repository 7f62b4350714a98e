"""Secrets never reach a transcript: each kind proven on the bytes of a real recorded file."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from eyas.tools.hosts.local import LocalHost
from eyas.tools.jobs.detached import Jobs, JobSpec, JobStatus
from eyas.tools.jobs.executor import launch_noted
from eyas.tools.recording.boundary import ReplayError
from eyas.tools.recording.recorder import Recorder
from eyas.tools.recording.redact import Redactor, remember_secrets, shown_env
from eyas.tools.recording.replay import ReplaySession
from eyas.tools.recording.transcript_reader import read_transcript
from eyas.tools.recording.transcript_writer import TranscriptWriter
from eyas.tools.settings.config import EyasConfig, HostConfig, TargetConfig, secret_values
from planted_secrets import API_KEY_FLAG, AZURE_KEY, PLANTED, UNIT_ENV, URL_PASSWORD, Planted
from stub_http import models_body, stub_server
from waiting import wait_for

# Made-up secrets in the shapes of real ones.
OPENAI = "sk-proj-Zq3vT8xWm2Lk9Rb4Ny7Hc1Jd6Fs5Ga0Pe"
HF = "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"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS = "AKIAIOSFODNN7EXAMPLE"
PLAIN = "correct-horse-battery-staple"  # a configured secret with no recognizable shape
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\nAAAAC3NzaC1lZDI1NTE5\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
SECRETS = (OPENAI, HF, GITHUB, AWS, PLAIN, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU=", "hunter2-password")


def assert_no_secret(path: Path) -> None:
    """Not in the file, and not inside any base64 blob of it either."""
    text = path.read_text()
    blobs = [base64.b64decode(blob).decode("latin-1") for blob in re.findall(r"[A-Za-z0-9+/]{24,}={0,2}", text)]
    for secret in SECRETS:
        assert secret not in text, f"{secret[:8]}... reached the transcript"
        assert not any(secret in blob for blob in blobs), f"{secret[:8]}... reached the transcript in base64"


def recorder(path: Path, *secrets: str) -> Recorder:
    return Recorder(TranscriptWriter(path, Redactor(secrets)))


def test_keys_in_http_headers_are_redacted_and_the_replay_still_matches(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rec = recorder(path)
    headers = {"Authorization": f"Bearer {OPENAI}", "X-Api-Key": PLAIN}
    with stub_server({"GET /v1/models": (200, models_body("m"))}) as url:
        live = rec.http().get(f"{url}/v1/models", headers=headers)
    rec.close()
    assert_no_secret(path)
    (event,) = read_transcript(path).events
    assert event.headers == {"Authorization": "[REDACTED]", "X-Api-Key": "[REDACTED]"}  # type: ignore[attr-defined]
    # The live request is redacted the same way on replay, so it still matches its event.
    assert ReplaySession.load(path).http().get(f"{url}/v1/models", headers=headers).body == live.body


def test_env_vars_in_commands_and_their_output_are_redacted(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rec = recorder(path)
    command = (
        f"export OPENAI_API_KEY={OPENAI}; HF_TOKEN={HF} sh -c 'echo token=$HF_TOKEN'; "
        f"echo password=hunter2-password; echo GH_TOKEN={GITHUB} AWS_ACCESS_KEY_ID={AWS}"
    )
    result = rec.host(LocalHost()).run(command, timeout=10)
    rec.close()
    assert HF in result.stdout  # the run itself saw the real values
    assert_no_secret(path)
    (event,) = read_transcript(path).events
    assert event.command.startswith("export OPENAI_API_KEY=[REDACTED]; HF_TOKEN=[REDACTED] sh -c")  # type: ignore[attr-defined]
    assert "token=[REDACTED]" in event.stdout  # type: ignore[attr-defined]
    session = ReplaySession.load(path)
    assert session.host("local").run(command, timeout=10).rc == 0 and session.report().ok


def test_a_secret_looking_job_environment_travels_by_file_not_in_the_launch_script(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rec = recorder(path)
    jobs = Jobs(rec.host(LocalHost()), str(tmp_path / "work"))
    spec = JobSpec(job_id="download", argv=["/bin/true"], env={"HF_TOKEN": HF, "WANDB_API_KEY": PLAIN, "A": "1"})
    launch_noted(rec, jobs, spec)
    wait_for(lambda: jobs.status("download").status is JobStatus.SUCCEEDED, 10, what="the job to end")
    rec.close()
    assert_no_secret(path)
    launch = next(event for event in read_transcript(path).events if event.kind == "job_launch")
    assert launch.env == {"A": "1"}  # type: ignore[attr-defined]
    secrets = tmp_path / "work" / "jobs" / "download" / "secrets.env"
    assert secrets.stat().st_mode & 0o777 == 0o600 and HF in secrets.read_text()


def test_secrets_in_llm_messages_and_answers_are_redacted(tmp_path: Path) -> None:
    """Stand-in: the answer comes from a plain function (the LLM client is not written yet)."""
    path = tmp_path / "t.jsonl"
    rec = recorder(path)
    request = {
        "model": "agent",
        "messages": [
            {"role": "system", "content": "You operate a GPU host."},
            {"role": "user", "content": f"Use my token {HF} and the key {OPENAI}; password: hunter2-password"},
        ],
        "max_tokens": 64,
    }
    rec.cross("llm", {"request": request}, lambda: {"response": {"text": f"I will export HF_TOKEN={HF}"}})
    rec.close()
    assert_no_secret(path)
    (event,) = read_transcript(path).events
    assert event.request["max_tokens"] == 64  # type: ignore[attr-defined]
    assert event.request["messages"][0]["content"] == "You operate a GPU host."  # type: ignore[attr-defined]


def test_configured_secret_values_are_redacted_whatever_they_look_like(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EYAS_TEST_TARGET_KEY", PLAIN)
    config = EyasConfig(
        hosts={"local": HostConfig(address="local", python="/usr/bin/python3", workdir=str(tmp_path))},
        target=TargetConfig(base_url="http://127.0.0.1:9", model="m", api_key_env="EYAS_TEST_TARGET_KEY"),
    )
    path = tmp_path / "t.jsonl"
    rec = Recorder(TranscriptWriter(path, Redactor(secret_values(config))))
    rec.host(LocalHost()).run(f"echo the server key is {PLAIN}", timeout=10)
    rec.close()
    assert_no_secret(path)
    assert read_transcript(path).events[0].stdout == "the server key is [REDACTED:secret]\n"  # type: ignore[attr-defined]


def test_private_keys_in_files_are_redacted(tmp_path: Path) -> None:
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(PEM)
    path = tmp_path / "t.jsonl"
    rec = recorder(path)
    assert rec.host(LocalHost()).read_text(str(key_file)) == PEM
    rec.close()
    assert_no_secret(path)
    assert read_transcript(path).events[0].content == "[REDACTED:private-key]\n"  # type: ignore[attr-defined]


def test_a_binary_file_hiding_a_secret_keeps_only_its_hash(tmp_path: Path) -> None:
    blob = tmp_path / "creds.bin"
    blob.write_bytes(b"\x00\x01\xfe" + PLAIN.encode() + b"\xff")
    path = tmp_path / "t.jsonl"
    rec = recorder(path, PLAIN)
    rec.host(LocalHost()).read_bytes(str(blob))
    rec.close()
    assert_no_secret(path)
    event = read_transcript(path).events[0]
    assert event.content is None and event.size == blob.stat().st_size  # type: ignore[attr-defined]
    with pytest.raises(ReplayError, match="holds only the size"):
        ReplaySession.load(path).host("local").read_bytes(str(blob))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"OPENAI_API_KEY={OPENAI}", "OPENAI_API_KEY=[REDACTED]"),
        (f"the key {OPENAI} works", "the key [REDACTED:openai-key] works"),
        (f"Authorization: Basic {base64.b64encode(b'user:pass').decode()}", "Authorization: Basic [REDACTED]"),
        (f"curl -H 'Authorization: Bearer {OPENAI}'", "curl -H 'Authorization: Bearer [REDACTED]'"),
        (f"clone {GITHUB} as {AWS}", "clone [REDACTED:github-token] as [REDACTED:aws-key]"),
        (f"login {HF}", "login [REDACTED:hf-token]"),
        ("vllm serve m --api-key s3cret --port 8000", "vllm serve m --api-key [REDACTED] --port 8000"),
        ('{"api_key": "s3cret", "max_tokens": 8}', '{"api_key": "[REDACTED]", "max_tokens": 8}'),
        ("https://me:s3cret@example.com/x", "https://me:[REDACTED]@example.com/x"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key = [REDACTED]"),
        (f"{PEM}after", "[REDACTED:private-key]\nafter"),
        ("curl -u eyas:pa55word https://n/x", "curl -u eyas:[REDACTED] https://n/x"),
        ("curl --user=eyas:pa55word https://n/x", "curl --user=eyas:[REDACTED] https://n/x"),
        ("mysql -h db -P 3306 -u eyas -pS3cret runs", "mysql -h db -P 3306 -u eyas -p[REDACTED] runs"),
        ("mysqldump -p'two words' runs", "mysqldump -p[REDACTED] runs"),
        ("MY_SECRET_THING=abc123 DB_PASSWORD_V2=x", "MY_SECRET_THING=[REDACTED] DB_PASSWORD_V2=[REDACTED]"),
        # A value the prose guard for `NAME: eyas's ...` would keep is still found by its shape.
        (f"OPENAI_API_KEY: {OPENAI}'s scope", "OPENAI_API_KEY: [REDACTED:openai-key]'s scope"),
        # Beside that figure in prose: a setting, a word value, a password after an article all stay hidden.
        ("token: 2 per request", "token: [REDACTED] per request"),
        ("a token: abc123 per request", "a token: [REDACTED] per request"),
        ("the password: 1234 is set", "the password: [REDACTED] is set"),
    ],
)
def test_common_secret_shapes(text: str, expected: str) -> None:
    redactor = Redactor()
    assert redactor.text(text) == expected
    assert redactor.text(expected) == expected  # idempotent: a replay redacts already-redacted text alike


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=8 num_speculative_tokens=3 completion_tokens: 3",
        "--tokenizer /models/x --api-key-file /etc/key",
        '{"pad_token": "<pad>", "eos_token": "<|im_end|>", "pad_token_id": 2}',
        "The token embeddings use basic arithmetic; enter your password below.",
        "export HF_TOKEN=$HF_TOKEN",
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        '{"data_bytes_per_token": 28672, "seconds_per_token": 0.02}',  # eyas plan --json: rates, not tokens
        # A fix message names where a secret is: its words stay.
        'set key_passphrase_env = "SSH_KEY_PASS" and api_key_env = "OPENAI_API_KEY", or --key-file /k',
        "--api-key: eyas's own servers listen on 127.0.0.1 only and take no key",
        "VLLM_API_KEY: eyas's own servers take none",  # prose: a possessive after the colon, no value
        "Environment=CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO OMP_NUM_THREADS=8 WORKERS=4",
        "https://example.com/x?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261201T000000Z&page=2",
        # -p and -u that carry no password: a port, a folder's parents, a uid:gid, a password from the environment.
        "mkdir -p /srv/a && ssh -p22 gpu && docker run -u 1000:1000 img && mysql -p runs",
        'echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ)"',  # eyas's own job script (in the recorded launch, base64)
        'curl -u "eyas:$NOTIFY_PASSWORD" https://n/x; mysql -p"$MYSQL_PWD" runs',
        '{"secrets": ["AZURE_OPENAI_KEY", "LICENSE_CODE"], "secret_names_env": "X"}',
        # The plan's prefill assumption (tools/planning/measure.py): a count in a sentence, not a token's value.
        "over 12.3 GFLOP a token: 2 per active parameter, 3.1 B, and the attention",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().text(text) == text


# Each planted secret where it is found in practice: alone, inside prose, in a JSON string, in a URL's query.
CONTEXTS = {
    "bare": "{}",
    "prose": "before {} after",
    "json": '{{"note": {}}}',
    "url": "https://example.com/callback?next={}",
}


@pytest.mark.parametrize("context", list(CONTEXTS))
@pytest.mark.parametrize("planted", PLANTED, ids=[planted.kind for planted in PLANTED])
def test_every_planted_shape_is_redacted_in_every_context(planted: Planted, context: str) -> None:
    carried = json.dumps(planted.carrier) if context == "json" else planted.carrier
    text = CONTEXTS[context].format(carried)
    redacted = Redactor().text(text)
    assert planted.secret not in redacted, redacted
    assert Redactor().text(redacted) == redacted


def test_a_units_environment_shows_only_what_is_known_harmless() -> None:
    """Every Environment= value is a secret unless its name is a known setting (CUDA, NCCL, vLLM...) or its value
    a plain one; a job gets the rest by file, never in run.sh or job.json."""
    env = {"NCCL_DEBUG": "INFO", "AZURE_OPENAI_KEY": AZURE_KEY, "LICENSE_SERVER_CODE": UNIT_ENV, "WORKERS": "4"}
    assert shown_env(env) == {**env, "AZURE_OPENAI_KEY": "[REDACTED]", "LICENSE_SERVER_CODE": "[REDACTED]"}
    spec = JobSpec(job_id="j", argv=["/bin/true"], env=env)
    assert spec.env == {"NCCL_DEBUG": "INFO", "WORKERS": "4"}
    assert spec.secrets == {"AZURE_OPENAI_KEY": AZURE_KEY, "LICENSE_SERVER_CODE": UNIT_ENV}


def test_a_secret_flag_and_its_value_as_two_words_of_an_argv_list() -> None:
    argv = ["vllm", "serve", "m", "--api-key", API_KEY_FLAG, "--port", "8000", "--token", "--x"]
    assert Redactor().value(argv) == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "[REDACTED]",
        "--port",
        "8000",
        "--token",
        "--x",
    ]


def test_a_password_with_slash_and_at_leaves_the_host_readable() -> None:
    assert Redactor().text(f"postgres://eyas:{URL_PASSWORD}@db:5432/x?e=a@b") == (
        "postgres://eyas:[REDACTED]@db:5432/x?e=a@b"
    )


def test_remembered_secrets_reach_redactors_made_later() -> None:
    secret = "plain-remembered-value-4711"
    assert Redactor().text(secret) == secret
    remember_secrets([secret])
    assert Redactor().text(f"x {secret} y") == "x [REDACTED:secret] y"
