"""`eyas ui [--host H] [--port N]`: serve the live dashboard of the runs folder with uvicorn."""

from __future__ import annotations

import ipaddress
import sys
from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import console, notice
from eyas.agents.faces.dashboard.auth import TOKEN_ENV, Sessions, dashboard_token
from eyas.graph.runs import runs_root


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ui_command(
    host: Annotated[
        str,
        typer.Option(
            help="address to listen on; anything but loopback opens it to the network. The dashboard answers only "
            "requests addressed to 127.0.0.1, localhost, [::1] or this (with the port), so browse to one of them"
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on", min=1, max=65535)] = 8790,
) -> None:
    """A live dashboard in the browser: the runs, each run's phase, jobs with progress and ETA, log tails and the
    report's charts as they grow; a pending gate with its plan, verification and exact commands, with buttons to
    approve, reject, edit sizes, retry or abort. Answers are recorded as `eyas approve` records them (by
    "dashboard"); the dashboard never drives a run. Log in with the token printed at start, or set your own in
    $EYAS_UI_TOKEN."""
    token, made_here = dashboard_token()
    root = runs_root()
    console.print(f"eyas dashboard: http://{escape(host)}:{port}/ for the runs in {escape(str(root))}", highlight=False)
    if not is_loopback(host):
        notice(f"Listening on {host}: anyone who can reach it sees the login page; all else needs the token.")
    if made_here:
        # The one secret eyas prints on purpose, once, to the terminal that started it (the redacting stream
        # would hide it); choose your own in $EYAS_UI_TOKEN to keep it off the terminal.
        shown = f"Log in with this token (shown once; ${TOKEN_ENV} sets your own): {token}"
        print(shown, file=sys.__stdout__, flush=True)
    else:
        console.print(f"Log in with the token in ${TOKEN_ENV}.", highlight=False)
    import uvicorn  # the server and its app load only for this command

    from eyas.agents.faces.dashboard.app import create_app
    from eyas.agents.faces.dashboard.guards import served_hosts

    app = create_app(root, Sessions(token), served_hosts(host, port))
    # No colours: the log goes through the stream that shows control characters as text (redacted_stream.py).
    uvicorn.run(app, host=host, port=port, log_level="info", server_header=False, use_colors=False)
