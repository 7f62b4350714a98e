"""Deploy with rollback on the embedded target that plays production (its own instance, port 18850): a drafter
that production cannot load is rolled back, and production is healthy with exactly its old argv, read from
/proc. Real `eyas` processes and a real vLLM; only the service manager is the stand-in for systemd
(tools/service/standin.py), which applies the drop-in the way systemd would."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from eyas.graph.runs import RunDir
from eyas.graph.session import run_meta
from eyas.tools.checks.result import Status
from eyas.tools.config_source import ConfigSource
from eyas.tools.planning.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from pipeline_runs import eyas
from production_target import server_argv, service

pytestmark = pytest.mark.slow


def a_run(target: EmbeddedTarget, runs: Path) -> RunDir:
    run = RunDir(runs / "deploy-run")
    run.write_meta(run_meta(ConfigSource(None, "a test", target), None, DEMO))
    return run


def test_a_drafter_production_cannot_load_is_rolled_back_to_the_exact_old_argv(
    production_target: EmbeddedTarget, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    run = a_run(production_target, runs)
    unit = service(production_target)
    argv_before = server_argv(production_target)

    done = eyas(production_target, runs, "deploy", run.run_id, "--drafter", str(tmp_path / "no-such-drafter"),
                "--probe-requests", "2", "--probe-max-tokens", "8")  # fmt: skip
    assert done.returncode == 4, done.stdout + done.stderr
    assert "rolled back" in done.stdout and "did not come up with the drafter" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr

    result = json.loads((run.root / "deploy.json").read_text())
    assert stat.S_IMODE((run.root / "deploy.json").stat().st_mode) == 0o600
    assert result["kept"] is False and result["argv_before"] == argv_before
    assert result["argv_deployed"][: len(argv_before)] == argv_before
    assert result["argv_deployed"][len(argv_before)] == "--speculative-config"
    assert json.loads(result["argv_deployed"][-1])["method"] == "eagle3"
    assert not Path(unit.drop_in_path()).exists()
    report = run.report.read_text()
    assert "## Deploy" in report and "**Drafter rolled back:** production did not come up" in report
    assert "--speculative-config" in report  # the exact change that was tried
    assert unit.health().status is Status.OK
    assert server_argv(production_target) == argv_before
