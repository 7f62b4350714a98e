"""The report's sections, each an HTML fragment from the run's record, and the small HTML parts every section builds
from. Every text that comes from the run is escaped with `h`; a section whose data the run lacks says so instead of
drawing nothing. The phases with progress over time (generation, extraction, training) are in `phases.py`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from eyas.agents.faces.report_html.charts import Chart, bar_chart, gantt
from eyas.agents.faces.report_html.record import RunRecord
from eyas.graph.phases.evaluate.record import Evaluation, run_evaluation
from eyas.graph.phases.report.headline import headline
from eyas.graph.phases.report.next_step import labelled, run_next_steps
from eyas.graph.phases.report.node import EVALUATION_KEYS, SIDE_BY_SIDE, side_by_side_rows
from eyas.graph.policy import started_policy
from eyas.graph.run_facts import run_facts
from eyas.graph.state import run_plan

JOB_PHASES = ("data", "extract", "vocab", "train", "evaluate")
_GPUS = re.compile(r"(\d+) x ")


def h(value: Any) -> str:
    return escape(str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "—" if value is None else str(value)


def megabytes(count: float | None) -> str:
    return "—" if count is None else f"{count / 1e6:,.2f} MB"


def missing(what: str) -> str:
    return f'<p class="missing">Not in this run: {h(what)}.</p>'


def figure(chart: Chart, caption: str) -> str:
    return (
        f'<figure class="chart" data-points="{chart.points}">{chart.svg}'
        f"<figcaption>{h(caption)} ({chart.points} points)</figcaption></figure>"
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of cells already escaped (or built from escaped parts); without headers, a table of facts, whose long
    values (paths, commits) wrap rather than widen it."""
    head = "".join(f"<th>{h(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    thead = f"<thead><tr>{head}</tr></thead>" if headers else ""
    kind = "" if headers else ' class="facts"'
    return f'<div class="scroll"><table{kind}>{thead}<tbody>{body}</tbody></table></div>'


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{h(anchor)}"><h2>{h(title)}</h2>{body}</section>'


# -- the summary ----------------------------------------------------------------------------------------------


def measured(result: Evaluation, key: str) -> str:
    """A measure as a cell that carries its exact value, with its interval when the evaluation has one."""
    value = result.figure(key)
    interval = result.intervals.of(key) if result.intervals else None
    shown = h(fmt(value))
    if interval is not None:
        shown += f' <span class="ci">[{h(fmt(interval[0]))}, {h(fmt(interval[1]))}]</span>'
    return f'<span data-key="{h(key)}" data-value="{h(value)}">{shown}</span>'


def summary(record: RunRecord) -> str:
    state = record.state
    target = record.config.get("target", {})
    rows = [
        ("run", h(record.run_id)),
        ("outcome", h(outcome_text(record))),
        *((label, h(step)) for label, step in labelled(next_steps_of(record))),
        ("target", h(f"{target.get('model', '?')} at {target.get('base_url', '?')}") if target else "—"),
        ("total time", h(hours_text(record.ended - record.started) if record.started and record.ended else "—")),
        ("GPU-hours", h(gpu_hours(record))),
        ("disk", h(disk_text(record))),
        ("plan", h(run_plan(state).verdict or "no plan was made")),
        ("verification", h(verification_verdict(state.get("verification", {})))),
    ]
    body = table((), [(f"<b>{h(name)}</b>", cell) for name, cell in rows])
    evaluation = run_evaluation(state)
    if evaluation:
        results = evaluation.results_by_k()
        measures = [(key, label) for key, label in EVALUATION_KEYS if key != "k"]
        body += '<h3>Drafter, measured on held-out prompts at temperature 0</h3><div id="drafter-result">'
        body += table(
            ("k", *(label for _, label in measures)),
            [(h(k), *(measured(result, key) for key, _ in measures)) for k, result in results.items()],
        )
        body += "</div>"  # fmt: skip
        body += f"<h3>Side by side at k={h(evaluation.k)}, on the same prompts and server flags</h3>"
        body += table(SIDE_BY_SIDE, [tuple(h(cell) for cell in row) for row in side_by_side_rows(evaluation)])
        body += "".join(f'<p class="disagreement">{h(note)}</p>' for note in evaluation.disagreement_notes())
        if not any(result.intervals for result in results.values()):
            body += missing("confidence intervals (this evaluation predates them)")
    elif run_facts(state).phase == "report":
        body += missing("a drafter result: the run ended before its evaluation")
    else:
        body += missing("a drafter result: the run has not reached its evaluation yet")
    return section("summary", "Summary", body)


def outcome_text(record: RunRecord) -> str:
    """The run's outcome in one line; a run waiting at a gate has none yet, and says where it waits."""
    return waiting_text(record.waiting) if record.waiting else headline(record.state, record.deploy)


def waiting_text(gate: str) -> str:
    return f"waiting at {gate} for an answer"


def next_steps_of(record: RunRecord) -> list[str]:
    """The report's next steps, held to the deploy_min_speedup of the policy the run started with."""
    min_speedup = started_policy(record.meta).deploy_min_speedup
    return run_next_steps(record.state, record.deploy, min_speedup)


def hours_text(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h ({seconds / 60:.1f} min)"


def phase_seconds(record: RunRecord, phase: str) -> float:
    return sum(span.end - span.start for span in record.spans if span.row == phase and span.kind != "wait")


def gpu_hours(record: RunRecord) -> str:
    job_seconds = sum(phase_seconds(record, phase) for phase in JOB_PHASES)
    check = record.state.get("verification", {}).get("gpus", {})
    found = _GPUS.match(check.get("message", "")) if check.get("status") == "ok" else None
    if found is None:
        return f"none: no GPU was found on the host; its jobs ran {hours_text(job_seconds)}"
    gpus = int(found.group(1))
    return f"{gpus * job_seconds / 3600:.2f} GPU-hours ({gpus} GPUs x {hours_text(job_seconds)} of jobs)"


def disk_text(record: RunRecord) -> str:
    plan = run_plan(record.state)
    written = last_value(record.job_progress("extract"), "bytes")
    planned = plan.phase("extract").disk_bytes
    parts = [f"hidden states {megabytes(written)} written against {megabytes(planned)} planned"]
    if plan.needed_bytes is not None:
        parts.append(f"the whole run planned {megabytes(plan.needed_bytes)} (other phases' bytes not measured)")
    return "; ".join(parts)


def verification_verdict(checks: dict[str, dict[str, str]]) -> str:
    if not checks:
        return "the host was not verified"
    by_status: dict[str, list[str]] = {}
    for name, check in checks.items():
        by_status.setdefault(check.get("status", "?"), []).append(name)
    return "; ".join(f"{status}: {', '.join(names)}" for status, names in by_status.items())


def last_value(rows: list[dict[str, Any]], key: str) -> Any:
    return next((row[key] for row in reversed(rows) if row.get(key) is not None), None)


# -- the timeline -------------------------------------------------------------------------------------------


def timeline(record: RunRecord) -> str:
    if not record.spans or record.started is None:
        return section("timeline", "Timeline", missing("a timeline: the transcript holds no node"))
    body = figure(gantt("timeline", record.spans, record.started), "Phases (blue), gates (grey), waits for an "
                  "answer (yellow) and failures (red)")  # fmt: skip
    waits = [span for span in record.spans if span.kind == "wait"]
    rows = [(h(span.row), h(span.label), h(f"{(span.end - span.start) / 60:.1f} min")) for span in waits]
    body += table(("gate", "answer", "waited"), rows) if rows else "<p>No gate waited for an answer.</p>"
    failures = [span for span in record.spans if span.kind == "failure"]
    failure = record.state.get("failure")
    lines = [f"{span.row}: {span.label}" for span in failures]
    if failure:
        lines.append(f"job {failure.get('job_id')} {failure.get('status')}: {failure.get('diagnosis')}")
    retried = {phase: ids for phase, ids in record.state.get("jobs", {}).items() if len(ids) > 1}
    lines += [f"{phase} ran {len(ids)} times: {', '.join(ids)}" for phase, ids in retried.items()]
    body += "<h3>Failures and retries</h3>" + (
        "<ul>" + "".join(f"<li>{h(line)}</li>" for line in lines) + "</ul>" if lines else "<p>None.</p>"
    )
    return section("timeline", "Timeline", body)


def evaluation(record: RunRecord) -> str:
    evaluation = run_evaluation(record.state)
    if not evaluation:
        return section("evaluation", "Evaluation", missing("an evaluation: the run ended before it"))
    results = evaluation.results_by_k()
    positions = max(len(result.per_position) for result in results.values())
    categories = [f"position {position + 1}" for position in range(positions)]
    groups = {f"k={k}": _padded(result.per_position, positions) for k, result in results.items()}
    errors: dict[str, tuple[Sequence[float], Sequence[float]]] = {}
    for k, result in results.items():
        bounds = result.intervals.per_position if result.intervals else []
        if len(bounds) == positions and all(len(b) == 2 and None not in b for b in bounds):
            errors[f"k={k}"] = ([float(b[0] or 0) for b in bounds], [float(b[1] or 0) for b in bounds])
    chart = bar_chart("eval-pos", "Acceptance by draft position", categories, groups, "acceptance rate", errors)
    body = figure(chart, "Acceptance per position for each k" + (" (95% intervals)" if errors else ""))
    ngrams = {k: evaluation.ngram_at(k) for k in results} if evaluation.ngram else {}  # none: not measured
    speeds = {
        "target alone": [result.tokens_per_s_baseline or 0.0 for result in results.values()],
        **({"n-gram": [(ngram.tokens_per_s_speculative or 0.0) if ngram else 0.0 for ngram in ngrams.values()]}
           if ngrams else {}),
        "drafter": [result.tokens_per_s_speculative or 0.0 for result in results.values()],
    }  # fmt: skip
    chart = bar_chart("eval-tps", "Decode speed", [f"k={k}" for k in results], speeds, "tokens/s")
    which = "the target alone, n-gram speculation and the drafter" if ngrams else "the target alone and the drafter"
    body += figure(chart, f"Tokens per second: {which}" + ("" if ngrams else " (n-gram not measured)"))
    return section("evaluation", "Evaluation", body)


def production(record: RunRecord) -> str:
    """What the run did to production: each stop and its downtime, and the deploy with production before and after."""
    stops = (record.state.get("production") or {}).get("stops", [])
    deploy = record.deploy
    phase = record.state.get("deploy") or {}  # the deploy phase's outcome, when the run reached it
    if not stops and not deploy and not phase:
        return section("production", "Production", "<p>The run neither stopped production nor deployed to it.</p>")
    body = ""
    if phase and phase.get("status") not in ("kept", "rolled_back"):
        body += f"<p><strong>Drafter not deployed ({h(phase['status'])}):</strong> {h(phase['reason'])}</p>"
    if stops:
        rows = [[h(stop["phase"]), h(f"{stop['service']} ({stop['backend']})"), h(f"{stop['downtime_s']:.0f} s"),
                 h(f"{stop['load_s']:.0f} s" if stop.get("load_s") is not None else "?"),
                 h(stop["restarted_because"])] for stop in stops]  # fmt: skip
        body += table(["phase", "service", "downtime", "load", "restarted because"], rows)
    if deploy:
        verdict = "kept" if deploy.kept else "rolled back"
        body += f"<p><strong>Drafter {verdict}:</strong> {h(deploy.reason)}</p>"
        if deploy.downtime_s is not None:
            body += f"<p>Production was down {deploy.downtime_s:.0f} s (each restart until healthy again).</p>"
        rows = [
            [h(label), fmt(probe.tokens_per_s), fmt(probe.mean_acceptance_length), fmt(probe.acceptance_rate),
             h(probe.requests)]
            for label, probe in (("before", deploy.before), ("with the drafter", deploy.after)) if probe is not None
        ]  # fmt: skip
        body += table(["production", "tokens/s", "mean acceptance length", "acceptance rate", "probe requests"], rows)
        body += f"<p>Drop-in {h(deploy.drop_in)}:</p><pre>{h(deploy.drop_in_text)}</pre>"
    return section("production", "Production", body)


def _padded(values: list[float], length: int) -> list[float]:
    return [float(value) for value in values] + [0.0] * (length - len(values))


# -- plan, verification, decisions, research ------------------------------------------------------------------


def verification(record: RunRecord) -> str:
    checks = record.state.get("verification", {})
    if not checks:
        return section("verification", "Verification", missing("a verification of the host"))
    rows = [(h(name), f'<span class="status {h(check.get("status"))}">{h(check.get("status"))}</span>',
             h(check.get("message", ""))) for name, check in checks.items()]  # fmt: skip
    return section("verification", "Verification", table(("check", "status", "finding"), rows))


def decisions(record: RunRecord) -> str:
    made = record.state.get("decisions", [])
    if not made:
        return section("decisions", "Decisions", missing("a decision at any gate"))
    rows = [(h(d.get("gate")), h(d.get("action")), h(d.get("who")), h(d.get("reason"))) for d in made]
    return section("decisions", "Decisions", table(("gate", "decision", "by", "why"), rows))


def research(record: RunRecord) -> str:
    text = record.state.get("research")
    if not text:
        return section("research", "Research", missing("a research summary (no [agent] LLM was configured)"))
    return section("research", "Research", f'<div class="research">{h(text)}</div>')
