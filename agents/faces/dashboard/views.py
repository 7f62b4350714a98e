"""The dashboard's pages, as HTML text. Every value from a run is escaped with `h`; charts and sections are the
report's own (agents/faces/report_html), so the live view and report.html always show the same things."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eyas.agents.faces.dashboard.forms import SIZE_PREFIX
from eyas.agents.faces.dashboard.standing import ListedRun
from eyas.agents.faces.gate_text import Line, gate_sections, gate_title
from eyas.agents.faces.progress_text import log_text
from eyas.agents.faces.report_html.page import STYLE, navigation, report_body
from eyas.agents.faces.report_html.record import RunRecord
from eyas.agents.faces.report_html.sections import fmt, h, last_value, section, table, waiting_text
from eyas.graph.gates.failure import FailureView
from eyas.graph.gates.view import GateView
from eyas.graph.shard_total import phase_total
from eyas.graph.state import GateAnswer
from eyas.tools.settings.sizes import typed_size

DASHBOARD_STYLE = """
header.bar { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
.gate { border: 2px solid #1f6feb; border-radius: 6px; padding: 0.5rem 1rem; margin: 1rem 0; }
.gate.failure { border-color: #d1242f; } .answered { background: #dafbe1; padding: 0.3rem 0.6rem; }
.gate form { margin: 0.6rem 0; } .gate label { display: inline-block; margin: 0.2rem 0.8rem 0.2rem 0; }
.gate input[type=text] { width: 18rem; max-width: 100%; }
pre.log { background: #f6f8fa; padding: 0.5rem; overflow-x: auto; font-size: 0.8rem; max-height: 20rem; }
code.command { white-space: pre-wrap; word-break: break-all; }
.error { color: #d1242f; } progress { width: 10rem; }
.badge { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 4px; padding: 0 0.3rem; font-weight: bold;
  white-space: nowrap; }
"""


def document(title: str, body: str, *, script: bool = False) -> str:
    tag = '<script src="/static/live.js" defer></script>' if script else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        f"<title>{h(title)}</title><style>{STYLE}{DASHBOARD_STYLE}</style>{tag}</head><body>{body}</body></html>\n"
    )


def hidden_csrf(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{h(csrf)}">'


def top_bar(title: str, csrf: str) -> str:
    logout = f'<form method="post" action="/logout">{hidden_csrf(csrf)}<button type="submit">log out</button></form>'
    return f'<header class="bar"><h1>{title}</h1><a href="/">all runs</a>{logout}</header>'


def login_page(error: str | None = None) -> str:
    problem = f'<p class="error" id="login-error">{h(error)}</p>' if error else ""
    form = (
        '<form method="post" action="/login"><label>token <input type="password" name="token" autocomplete="off" '
        'autofocus required></label> <button type="submit">log in</button></form>'
    )
    intro = "<p>The token was printed where <code>eyas ui</code> started (or is the one in $EYAS_UI_TOKEN).</p>"
    return document("eyas: log in", f"<h1>eyas dashboard</h1>{intro}{problem}{form}")


def message_page(title: str, text: str) -> str:
    return document(f"eyas: {title}", f'<h1>{h(title)}</h1><p class="error">{h(text)}</p><p><a href="/">runs</a></p>')


def runs_page(runs: Sequence[ListedRun], root: str, csrf: str) -> str:
    """The runs folder, runs waiting for an answer first (badged): each with its outcome, production's speedup, how
    long it has been quiet, its phase, where it stands and its driver (see `driver_phrase`)."""
    cells = [
        (run_cell(run), h(run.outcome), h(run.speedup or "—"), h(run.age), h(run.phase), h(run.condition),
         h(run.driver))
        for run in runs
    ]  # fmt: skip
    headers = ("run", "outcome", "speedup in production", "last activity", "phase", "state", "driver")
    listing = table(headers, cells) if cells else "<p>No run yet.</p>"
    return document("eyas runs", top_bar("eyas runs", csrf) + f'<p>In {h(root)}</p><div id="runs">{listing}</div>')


def run_cell(run: ListedRun) -> str:
    link = f'<a href="/runs/{h(run.run_id)}">{h(run.run_id)}</a>'
    return link if run.waiting is None else f'{link} <span class="badge">{h(waiting_text(run.waiting))}</span>'


def run_page(run_id: str, lead: str, gate: str, live: str, csrf: str, gate_id: str | None) -> str:
    """A run's page: under its title the outcome (or the gate it waits at, its answer forms right below), then the
    gate's full view, then the live part. live.js refreshes the lead and the live part; the forms stay put."""
    attribute = h(gate_id or "")
    body = top_bar(f"eyas run {h(run_id)}", csrf) + f'<div id="lead">{lead}</div>' + gate + navigation()
    body += f'<div id="live" data-run="{h(run_id)}" data-gate="{attribute}">{live}</div>'
    return document(f"eyas run {run_id}", body, script=True)


def lead(lines: Sequence[str]) -> str:
    """The outcome line (see standing.lead_lines) in bold, the next steps after it."""
    first, *rest = lines
    steps = "".join(f'<p class="step">{h(line)}</p>' for line in rest)
    return f'<p id="outcome"><strong>{h(first)}</strong></p>' + steps


def live_parts(lead_html: str, live: str) -> str:
    """What live.js swaps in, each part by the id of the element it fills."""
    return f'<div data-part="lead">{lead_html}</div><div data-part="live">{live}</div>'


# -- the live part ----------------------------------------------------------------------------------------------


def live_part(record: RunRecord, condition: str) -> str:
    """Phase and standing, the jobs with progress and ETA, each job's log tail, then the report's sections."""
    state = record.state
    head = table((), [("<b>phase</b>", h(state.get("phase", "none yet"))), ("<b>state</b>", h(condition))])
    return section("now", "Now", head + jobs_table(record) + log_tails(record)) + report_body(record)


def jobs_table(record: RunRecord) -> str:
    rows = []

    def row(phase: str, name: str, done: Any, total: Any, eta: Any) -> tuple[str, ...]:
        bar = f'<progress value="{h(done or 0)}" max="{h(total or 1)}"></progress> {h(fmt(done))}/{h(fmt(total))}'
        return h(phase), h(name), bar, h(f"{float(eta) / 60:.1f} min" if eta is not None else "—")

    for phase, ids in record.state.get("jobs", {}).items():
        last = []
        for job_id in ids:
            seen = record.progress.get(job_id, [])
            last.append({key: last_value(seen, key) for key in ("done", "total", "failed", "tokens_per_s", "eta_s")})
            eta = seen[-1].get("eta_s") if seen else None
            rows.append(row(phase, job_id, last[-1]["done"], last[-1]["total"], eta))
        whole = phase_total(last)
        if whole is not None:  # a sharded phase: its whole, after its jobs
            rows.append(row(phase, f"all {whole['jobs']} jobs", whole["done"], whole["total"], whole["eta_s"]))
    if not rows:
        return "<p>No job launched yet.</p>"
    return "<h3>Jobs</h3>" + table(("phase", "job", "progress (as last polled)", "ETA"), rows)


def log_tails(record: RunRecord) -> str:
    parts = [
        f'<h3>Log of {h(job_id)}</h3><pre class="log">{h(log_text(tail))}</pre>'
        for job_id, tail in record.log_tails.items()
    ]
    return "".join(parts)


# -- the gate ---------------------------------------------------------------------------------------------------


def gate_panel(run_id: str, gate_id: str, view: GateView | FailureView, csrf: str, answered: GateAnswer | None) -> str:
    """The gate's answers first (on a phone they stay on the first screen), then its full view (plan,
    verification, exact commands; or the failure and its log)."""
    shown = gate_body(view)
    if answered is not None:
        note = (f"Answered: {answered.action} by {answered.who}: {answered.reason or 'no reason given'}. A waiting "
                f"eyas process continues now; a stopped run continues with `eyas resume {run_id}`.")  # fmt: skip
        forms = f'<p class="answered" id="answered">{h(note)}</p>'
    else:
        forms = answer_forms(run_id, gate_id, view, csrf)
    kind = "failure" if isinstance(view, FailureView) else "approval"
    title = gate_title(view)
    title = title[:1].upper() + title[1:]
    return f'<section class="gate {kind}" id="gate"><h2>{h(title)}</h2>{forms}{shown}</section>'


def gate_body(view: GateView | FailureView) -> str:
    """The gate's sections (agents/faces/gate_text.py, as the terminal and the chat show them): commands and argvs
    whole, as code; a log's tail as it was written; the rest as a table, what stops the phase in red."""
    body = ""
    for part in gate_sections(view):
        if part.log:
            lines = "".join(f'<pre class="log">{h(line.text)}</pre>' for line in part.lines)
        elif part.code:
            lines = "".join(f'<p><code class="command">{h(line.text)}</code></p>' for line in part.lines)
        else:
            lines = table((), [_cells(line) for line in part.lines])
        body += f"<h3>{h(part.title)}</h3>{lines}"
    return body


def _cells(line: Line) -> tuple[str, str]:
    if line.alarm:
        return f'<b class="error">{h(line.label)}</b>', f'<span class="error">{h(line.text)}</span>'
    return f"<b>{h(line.label)}</b>", h(line.text)


def answer_forms(run_id: str, gate_id: str, view: GateView | FailureView, csrf: str) -> str:
    """A button per answer the gate takes, with a reason; where it takes an edit, a form with every size."""
    action_url = f"/runs/{h(run_id)}/answer"
    hidden = hidden_csrf(csrf) + f'<input type="hidden" name="gate_id" value="{h(gate_id)}">'
    reason = '<label>reason <input type="text" name="reason" maxlength="2000"></label>'
    buttons = "".join(
        f'<button type="submit" name="action" value="{h(action)}" id="{h(action)}">{h(action)}</button> '
        for action in view.actions
        if action != "edit"
    )
    forms = f'<form method="post" action="{action_url}" id="answer">{hidden}{reason} {buttons}</form>'
    if not isinstance(view, GateView) or "edit" not in view.actions:
        return forms
    fields = "".join(
        f'<label>{h(key)} <input type="text" name="{h(SIZE_PREFIX + key)}" value="{h(typed_size(value))}"></label>'
        for key, value in view.sizes.items()
    )
    forms += (
        f'<details><summary>edit sizes</summary><form method="post" action="{action_url}" id="edit-form">{hidden}'
        f'{fields}<br>{reason} <button type="submit" name="action" value="edit" id="edit">edit</button></form>'
        "</details>"
    )
    return forms
