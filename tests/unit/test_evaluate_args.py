"""evaluate.py without servers: its argument rules, prompt reading, and the workload's own /metrics parsing
checked against eyas's parser (tools/checks/vllm_metrics.py) on the same scrape. The measurements themselves need real
vLLM servers and are in test_drafter_e2e.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from eyas.tools.checks.vllm_metrics import summarize_vllm_metrics
from eyas.tools.jobs.upload import WORKLOADS_DIR

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import evaluate
import spec_metrics

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "vllm_metrics.txt"


def test_workload_counters_match_eyas_parser_on_a_two_engine_scrape() -> None:
    text = FIXTURE.read_text()
    ours = spec_metrics.scrape(text)
    theirs = summarize_vllm_metrics(text).spec_decode
    assert theirs is not None
    assert (ours.drafts, ours.draft_tokens, ours.accepted) == (
        theirs.num_drafts,
        theirs.num_draft_tokens,
        theirs.num_accepted_tokens,
    )
    assert ours.per_pos == theirs.accepted_per_pos
    summary = ours.summary(k=3)
    assert summary["mean_acceptance_length"] == pytest.approx(theirs.mean_acceptance_length)
    assert summary["acceptance_rate"] == pytest.approx(theirs.acceptance_rate)
    assert summary["per_position"] == pytest.approx([theirs.per_position_rate[p] for p in range(3)])


def test_deltas_between_scrapes_and_positions_never_exported() -> None:
    before = spec_metrics.scrape("")
    assert before == spec_metrics.Counters()
    after = spec_metrics.scrape(
        'vllm:spec_decode_num_drafts_total{engine="0"} 10\n'
        'vllm:spec_decode_num_drafts_created{engine="0"} 1.7e9\n'  # a timestamp, not a counter
        'vllm:spec_decode_num_draft_tokens_total{engine="0"} 30\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 7 1700000000000\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 6\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1",engine="0"} 1\n'
    )
    summary = after.minus(before).summary(k=3)
    assert summary["mean_acceptance_length"] == pytest.approx(1.7)
    assert summary["acceptance_rate"] == pytest.approx(7 / 30)
    assert summary["per_position"] == pytest.approx([0.6, 0.1, 0.0])  # position 2 accepted nothing
    with pytest.raises(ValueError, match="restarted"):
        before.minus(after)
    assert spec_metrics.Counters().summary(k=3)["mean_acceptance_length"] is None


def test_prompts_from_prompt_rows_and_conversations(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "prompt": "Name a bird."},
        {"id": "b", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]},
        {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
                      {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "6"}]},
        # prompt_split.py's held-out rows: a conversation's questions alone; measured on the first request.
        {"id": "c", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "One?"},
                                      {"from": "human", "value": "Two?"}]},
    ]  # fmt: skip
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
    assert evaluate.load_prompts(path) == [
        [{"role": "user", "content": "Name a bird."}],
        [{"role": "user", "content": "Hi"}],
        [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "One?"}],
    ]
    path.write_text(json.dumps({"messages": [{"role": "robot", "content": "?"}]}) + "\n")
    with pytest.raises(SystemExit, match=r"prompts.jsonl:1: expected"):
        evaluate.load_prompts(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--k", "3"], "pass --model and --drafter"),
        (["--speculative-url", "http://x", "--k", "1", "3"], "one k"),
        (["--speculative-url", "http://x"], "--baseline-url is needed"),
        (["--speculative-url", "http://x", "--model", "M"], "either --model/--drafter"),
        (["--model", "M", "--drafter", "NO_DRAFTER"], "has no config.json"),
        (["--model", "M", "--drafter", "DRAFTER", "--k", "0"], "must be positive"),
    ],
)
def test_argument_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text("{}")
    argv = [str(drafter) if a == "DRAFTER" else str(tmp_path / "none") if a == "NO_DRAFTER" else a for a in argv]
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--prompts", str(prompts), "--out", str(tmp_path / "r.json"), *argv])
    assert message in capsys.readouterr().err


def test_result_compares_texts_and_rates() -> None:
    spec = {"k": 3, "mean_acceptance_length": 2.0, "run": {"texts": ["a", "b"], "tokens": 20, "tokens_per_s": 30.0}}
    baseline = {"texts": ["a", "c"], "tokens": 20, "tokens_per_s": 20.0}
    result = evaluate.result_for(dict(spec), baseline)
    assert (result["speedup"], result["outputs_identical"], result["differing_prompts"]) == (1.5, False, [1])
    alone = evaluate.result_for(dict(spec), None)
    assert (alone["speedup"], alone["outputs_identical"], alone["tokens_per_s_baseline"]) == (None, None, None)


def test_intervals_resample_prompts_and_pair_the_speedup() -> None:
    def prompt(drafts: float, accepted: float, tokens: int, seconds: float) -> dict:
        counters = spec_metrics.Counters(
            drafts=drafts, draft_tokens=3 * drafts, accepted=accepted, per_pos={0: accepted}
        )
        return {"counters": counters, "tokens": tokens, "seconds": seconds}

    same = {"per_prompt": [prompt(10, 10, 20, 1.0) for _ in range(8)]}
    steady = evaluate.confidence_intervals(same, {"per_prompt": [prompt(0, 0, 20, 2.0)] * 8}, k=1)
    assert steady["mean_acceptance_length"] == [2.0, 2.0] and steady["speedup"] == [2.0, 2.0]
    assert steady["prompts"] == 8 and steady["per_position"] == [[1.0, 1.0]]

    # One prompt accepts everything, the rest nothing: the point estimate sits inside a wide interval.
    mixed = {"per_prompt": [prompt(10, 30, 40, 1.0)] + [prompt(10, 0, 10, 1.0) for _ in range(7)]}
    wide = evaluate.confidence_intervals(mixed, None, k=1)
    point = 1 + 30 / 80
    assert wide["mean_acceptance_length"][0] < point < wide["mean_acceptance_length"][1]
    assert wide["mean_acceptance_length"][0] >= 1.0 and "speedup" not in wide


def test_a_server_that_cannot_be_reached_is_one_paragraph(tmp_path: Path) -> None:
    prompts = tmp_path / "held_out.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": "hello"}) + "\n")
    with socket.socket() as probe:  # a loopback port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    argv = [sys.executable, str(WORKLOADS_DIR / "evaluate.py"), "--speculative-url", url, "--baseline-url", url,
            "--k", "3", "--prompts", str(prompts), "--out", str(tmp_path / "result.json")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "lost its server" in done.stderr and "rerun" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "result.json").exists()
