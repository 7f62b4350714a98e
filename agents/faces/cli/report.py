"""`eyas report RUN [--open]`: write the run's report.html from its folder, and open it in a browser; with
`--compare RUN2 ...`, a page that puts several runs side by side instead."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from eyas.agents.faces.cli.completion import complete_run_id
from eyas.agents.faces.cli.console import console, json_result
from eyas.agents.faces.cli.flags import JsonOption
from eyas.graph.runs import RunDir, open_run


def report_command(
    run_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN",
            help="the run (see `eyas runs`); with --compare, the runs to put beside it",
            autocompletion=complete_run_id,
        ),
    ],
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="compare the runs: `eyas report RUN --compare RUN2 [RUN3 ...]` writes compare.html and compare.md "
            "in RUN's folder, with their training curves overlaid and their sizes and evaluations side by side",
        ),
    ] = False,
    open_page: Annotated[bool, typer.Option("--open", help="open the page in the default browser")] = False,
    json_output: JsonOption = False,
) -> None:
    """Write runs/<run>/report.html: one page that works offline (charts inline, nothing fetched), readable on a
    phone and printable. Built from the run's checkpointed state when it has one, else from its transcript; a
    part the run lacks is said to be missing."""
    runs = [open_run(run_id) for run_id in check_run_count(run_ids, compare)]
    with json_result(json_output) as result:
        page = write_compared(runs, result) if compare else write_single(runs[0], result)
        if open_page:
            webbrowser.open(page.as_uri())


def check_run_count(run_ids: list[str], compare: bool) -> list[str]:
    """One run, or with --compare two or more different ones: anything else is said with its fix."""
    if compare and len(run_ids) < 2:
        raise typer.BadParameter("--compare needs the runs to compare: `eyas report RUN --compare RUN2 [RUN3 ...]`")
    if not compare and len(run_ids) > 1:
        raise typer.BadParameter(
            f"{len(run_ids)} runs given; a report is of one run. To compare them, add --compare: "
            f"`eyas report {run_ids[0]} --compare {' '.join(run_ids[1:])}`"
        )
    if len(set(run_ids)) < len(run_ids):
        raise typer.BadParameter("a run is named twice; compare different runs")
    return run_ids


def write_single(run: RunDir, result: dict[str, Any]) -> Path:
    # The graph's modules (langgraph, ~0.5 s) load here, not at start-up of every eyas process.
    from eyas.agents.faces.report_html.page import write_html_report
    from eyas.graph.life.run_view import read_run
    from eyas.graph.life.stored_outcome import known_state, stored_outcome

    view = read_run(run)
    path = write_html_report(run.root, view.state if view.started else None)
    console.print(f"report: {escape(str(path))}")
    outcome = stored_outcome(run, known_state(run, view))
    result.update(run_id=run.run_id, html=str(path), markdown=str(run.report) if run.report.exists() else None,
                  outcome=outcome.model_dump(mode="json") if outcome else None)  # fmt: skip
    return path


def write_compared(runs: list[RunDir], result: dict[str, Any]) -> Path:
    from eyas.agents.faces.report_html.compare_page import write_comparison
    from eyas.agents.faces.report_html.comparison import run_figures
    from eyas.agents.faces.report_html.record import load_record
    from eyas.graph.life.run_view import read_run

    figures = []
    for run in runs:
        view = read_run(run)
        figures.append(run_figures(run.run_id, load_record(run.root, view.state if view.started else None)))
    page, text = write_comparison(runs[0].root, figures)
    console.print(f"comparison: {escape(str(page))}")
    console.print(f"markdown: {escape(str(text))}")
    result.update(
        run_id=runs[0].run_id,
        compared=[run.run_id for run in runs],
        html=str(page),
        markdown=str(text),
        runs=[one.as_json() for one in figures],
    )
    return page
