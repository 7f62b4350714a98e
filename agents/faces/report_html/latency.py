"""The report's latency section: what `vllm bench serve` measured on the servers with and without the drafter, at
concurrency 1 and the run's (graph/phases/evaluate/bench_record.py)."""

from __future__ import annotations

from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import h, missing, section, table
from eyas.graph.phases.evaluate.bench_record import LATENCY_HEADERS
from eyas.graph.phases.evaluate.record import run_evaluation

TITLE = "Latency under load"


def latency(record: RunRecord) -> str:
    evaluation = run_evaluation(record.state)
    bench = evaluation.bench if evaluation else None
    if bench is None:
        return section("latency", TITLE, missing("vllm bench serve's latency (the evaluation did not run it)"))
    body = f'<p id="bench-caption">{h(bench.caption())}</p>'
    rows = bench.rows()
    if rows:
        body += '<div id="bench">' + table(LATENCY_HEADERS, [[h(cell) for cell in row] for row in rows]) + "</div>"
    return section("latency", TITLE, body)
