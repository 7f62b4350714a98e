"""`eyas report RUN [--open]`: write the run's report.html from its folder, and open it in a browser."""

from __future__ import annotations

import webbrowser
from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import console, json_result
from eyas.agents.faces.cli.options import JsonOption
from eyas.graph.runs import open_run


def report_command(
    run_id: Annotated[str, typer.Argument(help="the run (see `eyas runs`)")],
    open_page: Annotated[bool, typer.Option("--open", help="open the page in the default browser")] = False,
    json_output: JsonOption = False,
) -> None:
    """Write runs/<run>/report.html: one page that works offline (charts inline, nothing fetched), readable on a
    phone and printable. Built from the run's checkpointed state when it has one, else from its transcript; a
    part the run lacks is said to be missing."""
    # The graph's modules (langgraph, ~0.5 s) load here, not at start-up of every eyas process.
    from eyas.agents.faces.report_html.page import write_html_report
    from eyas.graph.life.runner import read_run

    run = open_run(run_id)
    view = read_run(run)
    with json_result(json_output) as result:
        path = write_html_report(run.root, view.state if view.started else None)
        console.print(f"report: {escape(str(path))}")
        result.update(run_id=run.run_id, html=str(path), markdown=str(run.report) if run.report.exists() else None)
        if open_page:
            webbrowser.open(path.as_uri())
