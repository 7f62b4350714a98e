"""The commands that read runs and jobs (`eyas status`, `eyas runs`, `eyas jobs`), which operators run every few
seconds under `watch`: entry.py runs each in an app of its own, with the whole app's root options and error
paragraphs, so that it imports what it needs and not every other command's imports (the graph and LangGraph, the
agents, the checks). cli/main.py wires the same commands into the whole app."""

from __future__ import annotations

from eyas.agents.faces.cli.root import root_app, run_app


def main(command: str) -> None:
    """Run the reading command `command` (one of entry.py's READING, the process's first argument)."""
    app = root_app()
    if command == "jobs":
        from eyas.agents.faces.cli.jobs import jobs_app

        app.add_typer(jobs_app, name="jobs")
    else:
        from eyas.agents.faces.cli.status import add_run_readers

        add_run_readers(app)
    run_app(app, None)
