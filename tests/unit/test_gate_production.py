"""A gate before GPU phases shows what happens to production, the downtime, the commands that stop and start it
and every server's argv, and an unattended policy stops there unless it allows the stop within budget. The
production unit is the motivating Kimi service (tests/support/fixtures/vllm_kimi.service)."""

from __future__ import annotations

import sys
from pathlib import Path

from eyas.agents.faces.gate_text import production_lines
from eyas.graph.context import RunContext
from eyas.graph.gates.view import gate_view
from eyas.graph.policy import PhaseEstimate, Policy
from eyas.graph.runs import RunDir
from eyas.graph.state import RunState
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.http import HttpClient
from eyas.tools.hosts.local import LocalHost
from eyas.tools.settings.config import LOCAL, EyasConfig, HostConfig, TargetConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES

FIXTURES = Path(__file__).parents[1] / "support" / "fixtures"


def stop(hours: float) -> dict[str, object]:
    return {"action": "stop", "downtime_hours": hours, "gpus": list(range(8)), "memory_bytes": 1, "reason": "r"}


def context(tmp_path: Path, policy: Policy | None) -> RunContext:
    config = EyasConfig(
        hosts={LOCAL: HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path))},
        target=TargetConfig(
            base_url="http://127.0.0.1:9",
            model="kimi-k2",
            model_dir="/data/models/Kimi-K2-Instruct",
            unit="vllm.service",
            unit_file=str(FIXTURES / "vllm_kimi.service"),
        ),
    )
    run = RunDir(tmp_path / "r")
    return RunContext(config=config, host=LocalHost(), http=HttpClient(), clock=SYSTEM_CLOCK, run=run, policy=policy)


STATE: RunState = {
    "sizes": DEFAULT_SIZES.model_dump(),
    "gpus": {"count": 8},
    # As the plan counts one downtime window: production stays stopped from training to the evaluation and loads
    # (0.4 h) once, after it.
    "plan": {"phases": {"train": {"phase_hours": 2.0, "production": stop(2.0)},
                        "evaluate": {"phase_hours": 1.0, "production": stop(1.4)}},
             "production_load": {"load_s": 1440.0, "source": "a test"}},
}  # fmt: skip


def test_training_gate_shows_production_for_training_and_evaluation(tmp_path: Path) -> None:
    view = gate_view("train", STATE, context(tmp_path, Policy()), [])
    assert set(view.production) == {"train", "evaluate"}
    assert isinstance(view.estimate, PhaseEstimate)
    assert view.estimate.production_action == "stop" and view.estimate.downtime_hours == 3.4
    assert view.window is not None and view.window.downtime_hours == 3.4 and view.window.phases == ["train", "evaluate"]
    # Stopped once, before training; started once, after the evaluation.
    assert view.production["train"].commands == ["systemctl stop vllm.service", "(the train phase's jobs)"]
    assert view.production["evaluate"].commands[0] == "(the evaluate phase's jobs)"
    servers = view.production["evaluate"].servers
    assert servers is not None
    baseline = servers.servers["baseline"]
    assert baseline[baseline.index("--tensor-parallel-size") + 1] == "8" and "--trust-remote-code" in baseline
    assert view.policy is not None and not view.policy.approve
    assert "does not allow_production_stop" in view.policy.reasons
    lines = production_lines(view.production)
    assert "train: stop, down for 2.00 h; GPUs 0-7: r" in lines
    assert "evaluate: $ systemctl start vllm.service; then wait for the deep health check" in lines
    assert any(line.startswith("evaluate server speculative-k3: ") and "--tensor-parallel-size 8" in line
               for line in lines)  # fmt: skip


def test_a_policy_that_allows_the_stop_within_budget_approves(tmp_path: Path) -> None:
    allowed = Policy(allow_production_stop=True, max_production_downtime_hours=4)
    approved = gate_view("train", STATE, context(tmp_path, allowed), []).policy
    assert approved is not None and approved.approve
    tight = Policy(allow_production_stop=True, max_production_downtime_hours=3)
    verdict = gate_view("train", STATE, context(tmp_path, tight), []).policy
    assert verdict is not None and not verdict.approve
    assert "production downtime 3.40 h is over the budget of 3 h" in verdict.reasons
