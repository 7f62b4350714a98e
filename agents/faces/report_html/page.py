"""report.html: the sections in one page with its style inline; nothing is fetched, nothing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eyas.agents.faces.report_html import phases, sections
from eyas.agents.faces.report_html.latency import TITLE as LATENCY_TITLE
from eyas.agents.faces.report_html.latency import latency
from eyas.agents.faces.report_html.plan_accuracy import plan_against_actual
from eyas.agents.faces.report_html.record import RunRecord, load_record
from eyas.agents.faces.report_html.sections import h
from eyas.agents.faces.report_html.what_ran import what_ran
from eyas.graph.phases.report.headline import headline
from eyas.tools.private_files import write_private

STYLE = """
:root { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328; line-height: 1.45; }
body { max-width: 60rem; margin: 0 auto; padding: 1rem; }
/* Never wider than the window, on a phone too: long lines and paths wrap, tables scroll inside their own box. */
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f8fa; padding: 0.5rem; font-size: 0.8rem; }
p, li, h1, h2, h3, figcaption, code, .research, table.facts td + td { overflow-wrap: anywhere; }
img, svg { max-width: 100%; }
#outcome { font-size: 1.05rem; }
h1 { font-size: 1.5rem; margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 0.2rem; }
nav a { margin-right: 0.8rem; white-space: nowrap; }
.scroll { overflow-x: auto; } table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
figure.chart { margin: 0.8rem 0; } figure.chart svg { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85rem; color: #57606a; }
.missing { color: #9a6700; background: #fff8c5; padding: 0.3rem 0.6rem; border-radius: 4px; }
.status.ok { color: #1a7f37; } .status.warn { color: #9a6700; } .status.fail { color: #d1242f; font-weight: bold; }
.ci { color: #57606a; font-size: 0.85em; } .research { white-space: pre-wrap; }
@media (max-width: 600px) { body { padding: 0.5rem; } table { font-size: 0.8rem; } }
@media print { nav { display: none; } section { break-inside: avoid-page; } figure.chart { break-inside: avoid; }
  body { max-width: none; } a { color: inherit; text-decoration: none; } }
"""

SECTIONS = (
    ("summary", "Summary", sections.summary),
    ("what-ran", "What ran", what_ran),
    ("timeline", "Timeline", sections.timeline),
    ("generation", "Generation", phases.generation),
    ("extraction", "Extraction", phases.extraction),
    ("training", "Training", phases.training),
    ("evaluation", "Evaluation", sections.evaluation),
    ("latency", LATENCY_TITLE, latency),
    ("production", "Production", sections.production),
    ("plan", "Plan", plan_against_actual),
    ("verification", "Verification", sections.verification),
    ("decisions", "Decisions", sections.decisions),
    ("research", "Research", sections.research),
)


def navigation() -> str:
    return "<nav>" + " ".join(f'<a href="#{anchor}">{h(title)}</a>' for anchor, title, _ in SECTIONS) + "</nav>"


def report_body(record: RunRecord) -> str:
    """Every section of the report (what the record lacks said first): the page's body, and the dashboard's."""
    notes = "".join(sections.missing(what) for what in record.missing)
    return notes + "".join(build(record) for _, _, build in SECTIONS)


def render_html(run_root: Path, state: dict[str, Any] | None = None) -> str:
    """The run's report page, from its folder (and its final state when the caller holds it)."""
    record = load_record(run_root, state)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>eyas run {h(record.run_id)}</title><style>{STYLE}</style></head>"
        f"<body><header><h1>eyas run {h(record.run_id)}</h1>"
        f'<p id="outcome"><strong>{h(headline(record.state, record.deploy))}</strong></p>'
        f"<p>The markdown report is beside this page: report.md.</p>{navigation()}</header>"
        f"{report_body(record)}</body></html>\n"
    )


def write_html_report(run_root: Path, state: dict[str, Any] | None = None) -> Path:
    """Write runs/<run>/report.html (owner-only, like the rest of the run folder) and return its path."""
    path = run_root / "report.html"
    write_private(path, render_html(run_root, state))
    return path
