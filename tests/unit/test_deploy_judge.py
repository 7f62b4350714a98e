"""Which measured drafters stay in production, the drop-in that adds one, and when the deploy gate approves by
policy: pure functions, no server."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from eyas.agents.faces.report_html.page import render_html
from eyas.graph.phases.deploy.node import outcome
from eyas.graph.phases.report.node import deploy_section, with_deploy
from eyas.graph.policy import Policy, judge_deploy
from eyas.tools.launch.unit_file import parse_unit_file
from eyas.tools.service.base import ServiceError
from eyas.tools.service.deploy import drop_in_text, judge
from eyas.tools.service.deploy_result import DeployResult, Probe
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.workloads.speculative import drafter_config, ngram_config

UNIT = """[Service]
Environment="NCCL_P2P_DISABLE=1"
ExecStart=/opt/venv/bin/vllm serve /models/kimi --tensor-parallel-size 8 --trust-remote-code --port 8000
"""


def probe(tokens_per_s: float, acceptance: float | None) -> Probe:
    return Probe(requests=4, completion_tokens=100, seconds=10.0, tokens_per_s=tokens_per_s,
                 mean_acceptance_length=acceptance)  # fmt: skip


def test_under_the_acceptance_threshold_or_without_counters_is_rolled_back() -> None:
    thresholds = Thresholds(min_acceptance_length=1.5, min_speedup=1.1)
    before = probe(10.0, None)
    assert judge(before, probe(20.0, 2.1), thresholds)[0] is True
    kept, reason, _ = judge(before, probe(20.0, 1.2), thresholds)
    assert not kept and reason == "mean acceptance length 1.20 is under the threshold 1.5"
    kept, reason, _ = judge(before, probe(10.5, 2.1), thresholds)
    assert not kept and reason.startswith(
        "lost to the target alone: speedup 1.05x is under the threshold 1.1x (10.5 tokens/s with the drafter"
    )
    kept, reason, _ = judge(before, probe(20.0, None), thresholds)
    assert not kept and "no speculative-decoding counters" in reason


def test_by_default_a_drafter_that_makes_production_slower_is_rolled_back_and_the_reason_says_how_much() -> None:
    """The demo's case: production went from 11.8 to 8.6 tokens/s with the drafter, and acceptance missed too."""
    before = probe(11.8, None)
    kept, reason, speedup = judge(before, probe(8.6, 1.9), Thresholds())
    assert not kept and speedup == pytest.approx(8.6 / 11.8)
    assert reason == (
        "lost to the target alone: speedup 0.73x is under the threshold 1x (8.6 tokens/s with the drafter, 11.8 "
        "without)"
    )  # no advice to lower the threshold: the one step that makes production slower is not a rollback's reason
    kept, reason, _ = judge(before, probe(8.6, 1.06), Thresholds())
    assert not kept and reason.startswith("mean acceptance length 1.06 is under the threshold 1.2; lost to the target ")
    # As fast as without it (1.0x) is kept, faster is kept; both figures are in the reason.
    kept, reason, _ = judge(before, probe(11.8, 1.9), Thresholds())
    assert kept and reason.endswith(
        "speedup 1.00x reaches the threshold 1x (11.8 tokens/s with the drafter, 11.8 without); n-gram not measured"
    )
    kept, reason, _ = judge(before, probe(17.7, 1.9), Thresholds())
    assert kept and reason.startswith("mean acceptance length 1.90 reaches the threshold 1.2; speedup 1.50x reaches")
    # No rate measured before the drafter: a speedup nobody measured does not keep it.
    kept, reason, _ = judge(probe(0.0, None), probe(17.7, 1.9), Thresholds())
    assert not kept and reason.startswith("lost to the target alone: speedup unknown is under the threshold 1x")


def test_the_drop_in_clears_exec_start_and_sets_only_the_speculative_config() -> None:
    unit = parse_unit_file(UNIT)
    text, argv = drop_in_text(unit, drafter_config("/data/drafter one", 3))
    effective = parse_unit_file(UNIT + text)
    assert effective.exec_start == argv == [*unit.exec_start, "--speculative-config",
        '{"method":"eagle3","model":"/data/drafter one","num_speculative_tokens":3}']  # fmt: skip
    assert effective.environment == unit.environment
    assert "ExecStart=\n" in text and shlex.split(text.splitlines()[-1].removeprefix("ExecStart=")) == argv
    # A drafter production serves already (the motivating service has one) is replaced, not doubled.
    _, replaced = drop_in_text(effective, drafter_config("/data/other", 4))
    assert replaced == [*unit.exec_start, "--speculative-config",
        '{"method":"eagle3","model":"/data/other","num_speculative_tokens":4}']  # fmt: skip
    served = parse_unit_file(UNIT.replace(" --port", " --speculative-config={} --port"))
    _, replaced = drop_in_text(served, drafter_config("/d", 3))
    assert replaced.count("--speculative-config") == 1 and "--speculative-config={}" not in replaced
    with pytest.raises(ServiceError, match="systemd expands"):
        drop_in_text(unit, drafter_config("/data/%i", 3))


def test_the_reports_show_production_before_and_with_the_drafter(tmp_path: Path) -> None:
    unit = parse_unit_file(UNIT)
    text, argv = drop_in_text(unit, drafter_config("/data/drafter", 3))
    result = DeployResult(kept=False, reason="mean acceptance length 1.06 is under the threshold 1.2",
                          drop_in="/etc/systemd/system/vllm.service.d/eyas-drafter.conf", drop_in_text=text,
                          argv_before=unit.exec_start, argv_deployed=argv, before=probe(4.8, None),
                          after=probe(3.9, 1.06))  # fmt: skip
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "deploy.json").write_text(result.model_dump_json())
    page = render_html(tmp_path)
    assert "Drafter rolled back:</strong> mean acceptance length 1.06" in page and "eyas-drafter.conf" in page
    assert "<td>rolled back: mean acceptance length 1.06 is under the threshold 1.2</td>" in page  # the outcome
    first = "# eyas run x\n\n**Outcome:** stopped at the deploy gate: rejected: later\n\n## Gates\n"
    markdown = with_deploy(with_deploy(first, result), result)
    assert markdown.count("## Deploy") == 1 and "| with the drafter | 3.900 | 1.060 |" in markdown
    assert "**Outcome:** rolled back: mean acceptance length 1.06 is under the threshold 1.2\n" in markdown
    assert "| before | 4.800 | n/a | n/a |" in markdown and "None" not in markdown  # no drafter, no acceptance yet


def test_the_deploy_gate_policy_asks_by_default_and_auto_approves_only_at_the_thresholds() -> None:
    evaluation = {"k": 3, "mean_acceptance_length": 1.6, "speedup": 1.05}
    asked = judge_deploy(Policy(), evaluation, 16)
    assert not asked.approve and asked.reasons == [
        'the policy\'s deploy = "ask": a person approves every change to production',
        "evaluation: drafter k=3 is fastest: 1.05x the target alone's tokens/s",
        "evaluation mean acceptance length 1.60 reaches the threshold 1.2",
    ]
    assert judge_deploy(Policy(deploy="auto"), evaluation, 16).approve
    slow = judge_deploy(Policy(deploy="auto", deploy_min_speedup=1.1), evaluation, 16)
    assert not slow.approve and slow.reasons == [
        "evaluation: nothing beats the target alone: the closest, drafter k=3 at 1.05x, is under the threshold 1.1x"
    ]
    # By default an evaluation that measured the drafter slower, or measured no speedup, is not approved unattended.
    slower = judge_deploy(Policy(deploy="auto"), {"k": 3, "mean_acceptance_length": 1.6, "speedup": 0.8}, 16)
    assert not slower.approve and "is under the threshold 1x" in slower.reasons[0]
    assert not judge_deploy(Policy(deploy="auto"), {"mean_acceptance_length": 1.6}, 16).approve
    low = judge_deploy(Policy(deploy="auto"), {"k": 3, "mean_acceptance_length": 1.1, "speedup": 1.2}, 16)
    assert not low.approve and low.reasons == [
        "evaluation mean acceptance length 1.10 is under the threshold 1.2",
        "evaluation: drafter k=3 is fastest: 1.20x the target alone's tokens/s",
    ]
    assert judge_deploy(Policy(deploy="auto"), None, 16).reasons == ["nothing was evaluated"]
    # One source for each default: the policy's thresholds are the deploy's own, and a run recorded before the
    # speedup threshold had a default (its policy says None) is held to the default, not to none.
    assert Policy().deploy_thresholds() == Thresholds() and Thresholds().min_speedup == 1.0
    recorded = Policy.model_validate({**Policy().model_dump(), "deploy_min_speedup": None})
    assert recorded.deploy_thresholds().min_speedup == Thresholds().min_speedup
    assert Policy.model_validate({"deploy_min_speedup": 0.5}).deploy_thresholds().min_speedup == 0.5


def test_a_deploy_that_did_not_change_production_says_why_in_the_report() -> None:
    argv = ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000"]
    rejected = outcome("rejected", "rejected at the deploy gate: not tonight; production untouched", "/d", argv)
    lines = "\n".join(deploy_section(rejected, None))
    assert lines.startswith("## Deploy") and "**Drafter not deployed (rejected):** rejected at the deploy gate" in lines
    assert f"Production runs: `{shlex.join(argv)}`" in lines


def test_production_keeps_the_drafter_only_when_it_beats_the_target_alone_and_n_gram_by_the_margin() -> None:
    """Production's counters give the drafter's speedup over the target alone; n-gram speculation's is the one the
    evaluation measured on the same prompts and flags, and the drafter must exceed it by the policy's margin."""
    before, thresholds = probe(10.0, None), Thresholds(ngram_margin=0.1)
    kept, reason, _ = judge(before, probe(15.0, 1.9), thresholds, ngram_speedup=1.3)
    assert kept and reason.endswith("speedup 1.50x beats n-gram's 1.30x by the margin 0.1 (needs 1.40x)")
    # Faster than the target alone, but within the margin of n-gram: rolled back, naming n-gram and its figures.
    kept, reason, speedup = judge(before, probe(13.5, 1.9), thresholds, ngram_speedup=1.3)
    assert not kept and speedup == pytest.approx(1.35)
    assert reason == (
        "lost to n-gram speculation: speedup 1.35x does not beat n-gram's 1.30x by the margin 0.1 (needs 1.40x) "
        "(deploy_ngram_margin in the policy, --ngram-margin)"
    )
    # Slower than both: each baseline it lost to is named.
    kept, reason, _ = judge(before, probe(9.0, 1.9), thresholds, ngram_speedup=1.3)
    assert not kept and reason.startswith("lost to the target alone: speedup 0.90x is under the threshold 1x")
    assert "; lost to n-gram speculation: speedup 0.90x does not beat n-gram's 1.30x" in reason
    # n-gram drafting slower than the target alone still sets the bar at its speedup plus the margin.
    assert judge(before, probe(10.0, 1.9), thresholds, ngram_speedup=0.8)[0] is True
    assert judge(before, probe(10.0, 1.9), Thresholds(ngram_margin=0.3), ngram_speedup=0.8)[0] is False


def test_the_gate_policy_approves_n_gram_where_it_wins_and_never_asks_about_its_acceptance() -> None:
    def evaluation(speedup: float, ngram: float | None) -> dict:
        measured = {"k": 3, "mean_acceptance_length": 1.8, "speedup": speedup, "tokens_per_s_baseline": 10.0}
        if ngram is not None:
            measured["ngram"] = {"3": {"k": 3, "speedup": ngram, "tokens_per_s_speculative": 10.0 * ngram,
                                       "mean_acceptance_length": 1.01}}  # fmt: skip
        return measured

    auto = Policy(deploy="auto", deploy_ngram_margin=0.1)
    # The drafter does not clear n-gram by the margin: n-gram wins, and its acceptance is held to no threshold.
    beaten = judge_deploy(auto, evaluation(1.2, 1.15), 16)
    assert beaten.approve and beaten.reasons == [
        "evaluation: n-gram k=3 is fastest: 1.15x the target alone's tokens/s; drafter k=3 (1.20x) is not measurably "
        "faster than the simpler n-gram k=3 (1.15x)"
    ]
    passed = judge_deploy(auto, evaluation(1.3, 1.15), 16)
    assert (
        passed.approve and passed.reasons[0] == "evaluation: drafter k=3 is fastest: 1.30x the target alone's tokens/s"
    )
    # One default, the deploy's own, which the policy carries into the thresholds it hands the deploy.
    assert Policy().deploy_ngram_margin == Thresholds().ngram_margin
    assert auto.deploy_thresholds().ngram_margin == 0.1


def test_the_keep_rule_states_the_n_gram_bar_or_that_n_gram_was_not_measured() -> None:
    thresholds = Thresholds(min_speedup=1.0, ngram_margin=0.05)
    stated = thresholds.keep_rule(1.2).sentence()
    assert stated.endswith("and >= 1.25x (n-gram speculation's evaluated 1.20x plus the margin 0.05)")
    unmeasured = thresholds.keep_rule(None).sentence()
    assert unmeasured.endswith("(tokens/s with the drafter over without); n-gram not measured")


def test_the_stated_rule_is_the_one_the_check_applies() -> None:
    """The gate's sentence and the verdict after the restart come from one rule: a drafter exactly at each bar the
    sentence states is kept, and one just under any of them is rolled back."""
    thresholds = Thresholds(min_acceptance_length=1.5, min_speedup=1.25, ngram_margin=0.25)  # exact in binary
    assert thresholds.keep_rule(1.25).sentence() == (
        "mean acceptance length >= 1.5 and speedup >= 1.25x (tokens/s with the drafter over without) and >= 1.50x "
        "(n-gram speculation's evaluated 1.25x plus the margin 0.25)"
    )
    before = probe(10.0, None)
    assert judge(before, probe(15.0, 1.5), thresholds, 1.25)[0] is True
    assert judge(before, probe(14.9, 1.5), thresholds, 1.25)[0] is False  # under n-gram's bar of 1.50x
    assert judge(before, probe(15.0, 1.49), thresholds, 1.25)[0] is False  # under the acceptance floor
    assert judge(before, probe(12.5, 1.5), thresholds, None)[0] is True  # n-gram not measured: the floors alone
    assert judge(before, probe(12.4, 1.5), thresholds, None)[0] is False  # under the speedup floor


def test_n_gram_is_kept_on_its_tokens_per_s_and_its_drop_in_names_no_drafter() -> None:
    """n-gram drafts only where the context repeats: production's counters may show next to no acceptance, and its
    speedup alone decides."""
    before = probe(10.0, None)
    kept, reason, _ = judge(before, probe(11.0, 1.01), Thresholds(), None, "ngram")
    assert kept and reason.startswith("speedup 1.10x reaches the threshold 1x (11.0 tokens/s with n-gram speculation")
    kept, reason, _ = judge(before, probe(9.0, None), Thresholds(), None, "ngram")
    assert not kept and reason.startswith("lost to the target alone: speedup 0.90x is under the threshold 1x")
    text, argv = drop_in_text(parse_unit_file(UNIT), ngram_config(2))
    assert argv[-1] == '{"method":"ngram","num_speculative_tokens":2,"prompt_lookup_max":4,"prompt_lookup_min":2}'
    assert "speculative decoding (ngram)" in text
    ngram_rule = Thresholds().keep_rule(1.3, method="ngram").sentence()
    assert ngram_rule.startswith("speedup >= 1x (tokens/s with n-gram speculation")
    result = DeployResult(kept=True, reason="fast", drop_in="/u.d/zz.conf", drop_in_text=text,
                          argv_before=parse_unit_file(UNIT).exec_start, argv_deployed=argv,
                          before=probe(10.0, None), after=probe(11.0, 1.01))  # fmt: skip
    markdown = "\n".join(deploy_section(outcome("kept", "fast", None, argv), result))
    assert "**N-gram speculation kept:** fast" in markdown and "| with n-gram speculation | 11.000 |" in markdown
