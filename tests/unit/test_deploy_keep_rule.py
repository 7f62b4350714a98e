"""The run's own deploy phase (the graph's node, not `eyas deploy`) holds production to n-gram's evaluated speedup,
and a rollback makes the service manager forget the drafter's drop-in.

Real parts: the graph and its checkpoint DB, a run folder, eyas's stand-in service running a real production
process from a unit file, real files for the unit and its drop-in. Stand-ins, named where they are defined: the
vLLM server (tests/support/vllm_standin.py: its speed must change with the drafter on demand) and systemd (below:
no systemd runs as PID 1 here)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eyas.graph.state import GateAnswer
from eyas.tools.checks.result import CheckResult, Status
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.local import LocalHost
from eyas.tools.launch.unit_file import UnitFile, parse_unit_file
from eyas.tools.service.base import DROP_IN, Service, ServiceStatus
from eyas.tools.service.deploy import drop_in_text, rollback, write_drop_in
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import target_service
from eyas.tools.workloads.speculative import drafter_config
from gated_runs import stored_run
from vllm_standin import VllmStandIn

RUN = "graph-deploy"
PRODUCTION_ARGV = [sys.executable, "-c", "import time; time.sleep(600)", "--port", "8000"]


@pytest.fixture
def five_times_faster(tmp_path: Path) -> Iterator[tuple[EmbeddedTarget, VllmStandIn]]:
    """Production whose tokens/s the drafter multiplies by about five, run by eyas's stand-in service."""
    vllm = VllmStandIn(without_s=0.1, with_s=0.02)
    target = EmbeddedTarget(tmp_path / "cache", port=vllm.port)
    target.workdir.mkdir(parents=True)
    target.unit_file.write_text(f"[Service]\nExecStart={shlex.join(PRODUCTION_ARGV)}\n")
    service = target_service(target, LocalHost())
    vllm.drop_in = Path(service.drop_in_path())
    try:
        yield target, vllm
    finally:
        service.stop()
        vllm.close()


def test_the_deploy_phase_rolls_back_a_drafter_that_loses_to_n_gram(
    tmp_path: Path, five_times_faster: tuple[EmbeddedTarget, VllmStandIn]
) -> None:
    """The evaluation measured the drafter at 12x and n-gram speculation at 9x on the same prompts, so the drafter
    wins and is deployed; production's own counters then see it make production only about five times as fast: it
    loses to n-gram's 9x there, and the phase must roll it back (a person approved the gate anyway)."""
    target, vllm = five_times_faster
    k = DEMO.num_speculative_tokens
    evaluation = {"k": k, "prompts": 16, "mean_acceptance_length": 3.0, "speedup": 12.0, "tokens_per_s_baseline": 10.0,
                  "tokens_per_s_speculative": 120.0,
                  "ngram": {str(k): {"k": k, "speedup": 9.0, "tokens_per_s_speculative": 90.0}}}  # fmt: skip
    run_dir = target.workdir / "runs" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "evaluation.json").write_text(json.dumps(evaluation))  # as the evaluate phase wrote it on the host
    drafter = str(run_dir / "drafter")
    values = {"run_id": RUN, "sizes": DEMO.model_dump(), "decisions": [], "plan": {"verdict": "fits"},
              "artifacts": {"drafter": drafter}, "jobs": {"evaluate": [f"{RUN}.evaluate"]}}  # fmt: skip
    approve = GateAnswer(action="approve", reason="deploy it and let production's counters decide")
    _, ended = stored_run(target, tmp_path / "runs", values, after="monitor_evaluate", ask=lambda view, _: approve)
    deployed = ended.state["deploy"]
    assert ended.finished and vllm.completions > 0, ended
    assert deployed["status"] == "rolled_back", deployed
    reason = deployed["reason"]
    assert reason.startswith("lost to n-gram speculation: speedup ") and "target alone" not in reason, reason
    assert "does not beat n-gram's 9.00x by the margin 0.05 (needs 9.05x)" in reason
    assert deployed["tokens_per_s_after"] > deployed["tokens_per_s_before"]  # n-gram alone held it back
    assert not vllm.drafting() and deployed["argv_after"] == PRODUCTION_ARGV


class SystemdStandIn(Service):
    """STAND-IN for systemd (none runs as PID 1 here), keeping the one trait a rollback depends on: a start runs
    the unit and drop-ins as systemd last read them (daemon-reload), while `systemctl cat` shows the files."""

    backend = "systemd"

    def __init__(self, unit: Path) -> None:
        super().__init__(lambda: CheckResult(name="health", status=Status.OK, message="generating"), SYSTEM_CLOCK)
        self.host, self.name, self.unit = LocalHost(), unit.name, unit
        self.loaded = self.effective_unit()
        self.running: list[str] | None = None

    def effective_unit(self) -> UnitFile:
        drop_ins = sorted(Path(self.drop_in_path()).parent.glob("*.conf"))
        return parse_unit_file("\n".join(path.read_text() for path in [self.unit, *drop_ins]))

    def reload(self) -> None:
        self.loaded = self.effective_unit()

    def _start(self) -> None:
        self.running = self.loaded.exec_start

    def stop(self) -> None:
        self.running = None

    def status(self) -> ServiceStatus:
        return ServiceStatus(backend=self.backend, name=self.name, active=self.running is not None)

    def log_tail(self, lines: int = 25) -> str:
        return ""

    def drop_in_path(self, name: str = DROP_IN) -> str:
        return f"{self.unit}.d/{name}"


def test_a_rollback_has_the_service_manager_forget_the_drop_in(tmp_path: Path) -> None:
    """Without a daemon-reload after the drop-in is removed, systemd restarts production with the drafter still in
    its command line, while the files say it is gone."""
    unit = tmp_path / "vllm.service"
    unit.write_text(f"[Service]\nExecStart={shlex.join(PRODUCTION_ARGV)}\n")
    systemd = SystemdStandIn(unit)
    systemd.start()
    text, argv = drop_in_text(systemd.effective_unit(), drafter_config("/data/drafter", 3))
    Path(systemd.drop_in_path()).parent.mkdir()
    write_drop_in(systemd, systemd.drop_in_path(), text)
    systemd.restart()
    assert systemd.running == argv  # the deploy's restart serves the drafter
    said: list[str] = []
    result = DeployResult(kept=False, reason="lost", drop_in=systemd.drop_in_path(), drop_in_text=text,
                          argv_before=PRODUCTION_ARGV, argv_deployed=argv)  # fmt: skip
    rolled = rollback(systemd, Thresholds(), said.append, result)
    assert not Path(systemd.drop_in_path()).exists() and not rolled.kept
    assert systemd.running == PRODUCTION_ARGV, "production restarted with the drafter the rollback removed"
