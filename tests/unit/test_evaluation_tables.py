"""What `eyas run` prints when a run ends: the recorded example's evaluation as the drafter table (its baselines
beside it) and the latency table from vLLM's benchmark, each figure as the example holds it, and a benchmark that
could not run as its reason."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from eyas.agents.faces.cli.evaluation_tables import evaluation_table, latency_table
from eyas.graph.phases.evaluate.bench_record import Bench
from eyas.graph.phases.evaluate.record import run_evaluation

EXAMPLE = Path(__file__).resolve().parents[2] / "runs" / "examples" / "full-pipeline" / "evaluation.json"


def rendered(table: object) -> str:
    console = Console(record=True, width=220)
    console.print(table)
    return console.export_text()


def test_the_example_prints_both_tables_with_every_server_and_concurrency() -> None:
    recorded = json.loads(EXAMPLE.read_text())
    evaluation = run_evaluation({"evaluation": recorded})
    assert evaluation is not None and evaluation.bench is not None
    drafter = rendered(evaluation_table(evaluation))
    assert f"acceptance length {recorded['mean_acceptance_length']:.2f}" in drafter and "n-gram" in drafter
    latency = rendered(latency_table(evaluation.bench)).splitlines()
    for server, runs in recorded["bench"]["servers"].items():
        for concurrency, run in runs.items():
            row = next(line for line in latency if line.replace("│", " ").split()[:2] == [server, concurrency])
            assert f"{run['median_ttft_ms']:,.0f}" in row and f"{run['output_throughput']:,.1f}" in row, row
            if server != "baseline":
                assert f"{recorded['bench']['speedup'][server][concurrency]:.2f}" in row, row
    assert any("temperature 0" in line for line in latency)  # the caption: what ran, on what


def test_a_benchmark_that_could_not_run_says_why_instead_of_rows() -> None:
    text = rendered(latency_table(Bench(error="vLLM's benchmark is not installed in the target's Python")))
    assert "vllm bench serve: vLLM's benchmark is not installed" in " ".join(text.split())


def test_the_drafter_table_reads_in_prose_each_figure_once_to_its_significant_digits() -> None:
    """The run's last screen: labels a person reads (not evaluate.py's JSON keys), no figure with more digits than the
    measurement holds, and no figure twice (the side-by-side rows say tokens/s, acceptance length and speedup)."""
    measured = {"k": 3, "mean_acceptance_length": 1.5127, "acceptance_rate": 0.17089, "tokens_per_s_baseline": 16.46,
                "tokens_per_s_speculative": 12.318, "speedup": 0.74836, "outputs_identical": True}  # fmt: skip
    evaluation = run_evaluation({"evaluation": measured})
    assert evaluation is not None
    rows = {" ".join(line.strip("│ ").split()) for line in rendered(evaluation_table(evaluation)).splitlines()}
    assert {"speculative tokens (k) │ 3", "acceptance rate │ 0.171", "outputs identical at temperature 0 │ yes",
            "target alone │ 16.5 tokens/s"} <= rows, rows  # fmt: skip
    text = " ".join(rows)
    assert "tokens_per_s" not in text and "16.460" not in text and "12.318" not in text, text
    assert text.count("12.3 tokens/s") == 1 and text.count("speedup 0.75x") == 1, text
