"""What an overnight script reads of a run's end (issue 41): `eyas status --json`, `eyas runs --json` and `eyas
report --json` carry one outcome (graph/phases/report/outcome.py: the deploy's verdict, method and k, production's
own figures, the headline and the next step, every method evaluated), and `eyas resume` exits 4 when production
rolled the drafter back. The real command line in this process, real run folders: one stored as the deploy node
leaves a rollback (the real graph and checkpoint DB; `eyas resume` drives its real report node), and a copy of the
recorded example run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deploy_results import rolled_back
from eyas.graph.phases.report.outcome import RunOutcome
from eyas.graph.runs import RunDir
from eyas.tools.exit_codes import ExitCode
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from gated_runs import PLAN, stored_run
from in_process import eyas

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline"
EVALUATION = json.loads((EXAMPLE / "evaluation.json").read_text())
ROLLED = "rolled-back-run-20261207-1530-ab12"


def phase_outcome(result_reason: str) -> dict[str, Any]:
    """The deploy node's outcome of the rollback in tests/support/deploy_results.py (its probes' figures)."""
    return {"status": "rolled_back", "reason": result_reason, "drafter": "/w/drafter", "mean_acceptance_length": 1.03,
            "acceptance_rate": None, "tokens_per_s_before": 11.8, "tokens_per_s_after": 8.6, "downtime_s": 90.0,
            "argv_before": ["vllm", "serve"], "argv_after": ["vllm", "serve"]}  # fmt: skip


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runs folder with a run whose deploy phase has just rolled the drafter back (its report not written yet)."""
    root = tmp_path_factory.mktemp("outcome")
    runs = root / "runs"
    (runs / ROLLED).mkdir(parents=True)
    result = rolled_back(runs / ROLLED)
    values = {"run_id": ROLLED, "sizes": DEMO.model_dump(), "plan": PLAN, "decisions": [], "evaluation": EVALUATION,
              "artifacts": {"drafter": "/w/drafter"}, "phase": "deploy",
              "deploy": phase_outcome(result.reason)}  # fmt: skip
    stored_run(EmbeddedTarget(root / "cache", port=9), runs, values, after="deploy")
    return {"EYAS_RUNS_DIR": str(runs), "EYAS_CACHE_DIR": str(root / "cache")}


def outcome_of(said: dict[str, Any]) -> RunOutcome:
    """The outcome a command printed, checked against the one model: every key it names, none beyond them."""
    assert set(said["outcome"]) == set(RunOutcome.model_fields), said["outcome"]
    return RunOutcome.model_validate(said["outcome"])


def test_a_resumed_run_whose_drafter_was_rolled_back_exits_4(place: dict[str, str]) -> None:
    resumed = eyas("resume", ROLLED, env=place)
    assert resumed.code == ExitCode.ROLLED_BACK, resumed.output
    assert (Path(place["EYAS_RUNS_DIR"]) / ROLLED / "report.md").exists()  # it ended: its report is written


@pytest.mark.parametrize("argv", [("status", ROLLED, "--json"), ("report", ROLLED, "--json")], ids=["status", "report"])
def test_status_and_report_json_carry_the_deploy_outcome(place: dict[str, str], argv: tuple[str, ...]) -> None:
    ran = eyas(*argv, env=place)
    assert ran.code == ExitCode.OK, ran.output
    outcome = outcome_of(json.loads(ran.stdout))
    deploy = outcome.deploy
    assert (deploy.status, deploy.method, deploy.k) == ("rolled_back", "eagle3", 3)
    assert deploy.production is not None
    assert (deploy.production.tokens_per_s_before, deploy.production.tokens_per_s_after) == (11.8, 8.6)
    assert deploy.production.mean_acceptance_length == 1.03
    assert outcome.headline.startswith("rolled back: speedup 0.73x is under the threshold 1x")
    # The example's evaluation has n-gram faster than the drafter: the next step says to deploy it instead.
    assert outcome.next_steps[0].startswith("deploy n-gram speculation at k=3 rather than the drafter")
    assert [(method.method, method.k) for method in outcome.evaluated] == [
        ("target alone", None), ("drafter", 3), ("n-gram", 3)]  # fmt: skip
    drafter = outcome.evaluated[1]
    assert (drafter.tokens_per_s, drafter.speedup) == (EVALUATION["tokens_per_s_speculative"], EVALUATION["speedup"])
    assert drafter.speedup_interval == tuple(EVALUATION["intervals"]["speedup"])


def test_runs_json_carries_each_runs_outcome(place: dict[str, str]) -> None:
    (Path(place["EYAS_RUNS_DIR"]) / "a-chat").mkdir()
    RunDir(Path(place["EYAS_RUNS_DIR"]) / "a-chat").write_meta({"kind": "chat", "sizes": None})
    ran = eyas("runs", "--json", env=place)
    assert ran.code == ExitCode.OK, ran.output
    rows = {row["run"]: row for row in json.loads(ran.stdout)}
    assert outcome_of(rows[ROLLED]).deploy.status == "rolled_back"
    assert rows["a-chat"]["outcome"] is None  # a chat has no pipeline outcome


def test_the_three_commands_say_the_same_of_the_recorded_example(tmp_path: Path) -> None:
    """The example run stopped at the deploy gate (a person said no) and has no checkpoint: status, runs and report
    read its outcome from its transcript alike: nothing deployed, its evaluation's figures, and n-gram, which
    measured faster than the drafter, as the next step."""
    shutil.copytree(EXAMPLE, tmp_path / "runs" / "full-pipeline")  # `eyas report` writes report.html beside them
    place = {"EYAS_RUNS_DIR": str(tmp_path / "runs"), "EYAS_CACHE_DIR": str(tmp_path / "cache")}
    said = {argv[0]: json.loads(ran.stdout) for argv in (("status", "full-pipeline", "--json"), ("runs", "--json"),
            ("report", "full-pipeline", "--json")) if (ran := eyas(*argv, env=place)).code == ExitCode.OK}  # fmt: skip
    assert set(said) == {"status", "runs", "report"}, said
    outcome = outcome_of(said["status"])
    assert outcome_of(said["report"]) == outcome
    assert outcome_of(next(row for row in said["runs"] if row["run"] == "full-pipeline")) == outcome
    assert outcome.deploy.status == "not_deployed" and outcome.deploy.production is None
    assert outcome.headline.startswith("stopped at the deploy gate: rejected")
    assert outcome.next_steps[0].startswith("deploy n-gram speculation at k=3 rather than the drafter")
    alone, drafter, ngram = outcome.evaluated
    assert alone.tokens_per_s == EVALUATION["tokens_per_s_baseline"] and alone.speedup is None
    assert (drafter.method, drafter.mean_acceptance_length) == ("drafter", EVALUATION["mean_acceptance_length"])
    assert (ngram.method, ngram.speedup) == ("n-gram", EVALUATION["ngram"]["3"]["speedup"])
    # Without a checkpoint, the phase is the one its transcript ended in, as its outcome is.
    assert said["status"]["phase"] == "report"
    assert next(row for row in said["runs"] if row["run"] == "full-pipeline")["phase"] == "report"
    first = eyas("status", "full-pipeline", env=place).stdout.splitlines()[0]
    assert first == "full-pipeline: phase report; idle", first
