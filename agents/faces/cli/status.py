"""`eyas status RUN` and `eyas runs`: where a run stands, and where every run in the runs folder stands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from eyas.agents.faces.cli.completion import run_argument
from eyas.agents.faces.cli.console import console, decision_text, print_json, say, say_next_steps
from eyas.agents.faces.cli.flags import JsonOption
from eyas.agents.faces.cli.id_cells import add_id_column, shown_ids
from eyas.agents.faces.job_table import BAR_WIDTH, job_rows
from eyas.graph.phases.evaluate.record import run_evaluation
from eyas.graph.runs import open_run, runs_root
from eyas.graph.state import run_plan
from eyas.tools.exit_codes import ExitCode, exit_codes_help


def status_command(
    run_id: Annotated[str, run_argument("the run")],
    json_output: JsonOption = False,
) -> None:
    """Where a run is: its phase, the gate it waits at, each job with its progress, and the decisions so far."""
    from eyas.graph.life.run_view import read_run
    from eyas.graph.life.stored_outcome import known_state, stored_outcome
    from eyas.graph.life.watch import driver_facts

    run = open_run(run_id)
    view = read_run(run)
    # A run without a checkpoint (a recorded one) is told from its transcript; its jobs are polled only from a
    # checkpoint, the host of a copied run folder being another's.
    state, pending = known_state(run, view), view.pending
    jobs, unreachable = job_rows(run, view.state)
    evaluation = run_evaluation(state)
    outcome = stored_outcome(run, state)
    summary = {
        "run_id": run_id,
        "outcome": outcome.model_dump(mode="json") if outcome else None,
        "phase": state.get("phase"),
        "driven": run.is_driven(),
        "driver": driver_facts(run, time.time()),
        "waiting_at": pending[1] if pending else None,
        "stopped": state.get("stopped"),
        "decisions": state.get("decisions", []),
        "jobs": jobs,
        "jobs_unreadable": unreachable,
        "plan": run_plan(state).verdict,
        "evaluation": state.get("evaluation"),
        "side_by_side": [row._asdict() for row in evaluation.side_by_side()] if evaluation else None,
    }
    if json_output:
        print_json(summary)
        return
    phase = summary["phase"] or "none yet (the run has not started its first phase)"
    driven = "driven now" if summary["driven"] else "idle"
    console.print(f"[bold]{escape(run_id)}[/]: phase {escape(phase)}; {driven}")
    if outcome is not None and (view.ended or not view.started):  # ended, or a recorded run: how it ended first
        say(f"outcome: {outcome.headline}")
        say_next_steps(outcome.next_steps)
    if summary["driver"]:
        print_driver(summary["driver"], waiting=pending is not None)
    if pending:
        console.print(f"[yellow]waiting at[/] {escape(gate_phrase(pending[1]))}")
    if jobs:
        console.print(jobs_table(jobs))
    if unreachable:
        console.print(f"[yellow]jobs not read:[/] {escape(unreachable)}", highlight=False)
    for decision in summary["decisions"]:
        console.print(" ".join(decision_text(decision)), markup=False, highlight=False)
    if evaluation:
        console.print(f"evaluated at k={evaluation.k} on {evaluation.prompts} held-out prompts, side by side:")
        for measured in evaluation.side_by_side():
            console.print(f"  {measured.name}: {measured.summary()}", markup=False, highlight=False, soft_wrap=True)


JOB_ID_SHARE = 0.2  # the job ids' column beside a progress bar: the run's whole id is on the line above the table


def jobs_table(jobs: list[dict[str, Any]]) -> Table:
    """The run's jobs: each id names its phase at its end, which a narrow terminal keeps (the id is cut in its
    middle); a sharded phase's total follows its jobs."""
    table = Table(title="jobs", title_justify="left")
    shown = shown_ids([row["job_id"] for row in jobs], console, JOB_ID_SHARE)
    add_id_column(table, "job", shown)
    table.add_column("state")
    table.add_column("progress", min_width=BAR_WIDTH)  # the bar whole; its count wraps below it
    table.add_column("figures")
    table.add_column("ETA")
    for job_id, row in zip(shown, jobs, strict=True):
        table.add_row(*(escape(cell) for cell in (job_id, row["state"], row["bar"], row["figures"], row["eta"])))
    return table


def gate_phrase(gate: dict[str, Any]) -> str:
    """The gate a run waits at, in words: its kind and phase, and why the policy left it to a person."""
    kind = "failure" if gate.get("kind") == "failure" else "approval"
    policy = gate.get("policy") or {}
    reasons = "; ".join(policy.get("reasons") or [])
    why = f" (the policy asks a person: {reasons})" if reasons and not policy.get("approve") else ""
    return f"the {kind} gate of {gate.get('phase') or 'an unknown phase'}{why}; answer it with `eyas approve`"


def print_driver(driver: dict[str, Any], *, waiting: bool) -> None:
    """The driver's line of `eyas status`: alive or not, its heartbeat's age, its job and log, an outage. A driver
    that ended at the gate the run waits at is said without its last words: the waiting line says which gate."""
    age = driver["heartbeat_age_s"]
    if age is None:
        beat = "no heartbeat yet"
    elif driver["condition"] == "ended":
        beat = f"last heartbeat {age:.0f} s ago"
    else:
        beat = f"heartbeat {age:.0f} s ago (stale after {driver['stale_after_s']:.0f} s)"
    job = f"; job {driver['job']} {driver['job_state']}" if driver["job"] else ""
    restarts = f"; restarts by eyas watch: {driver['restarts']}" if driver["restarts"] else ""
    detail = "" if waiting and driver["condition"] == "ended" else f" ({driver['detail']})"
    console.print(f"driver: {driver['condition']}{detail}{job}; {beat}{restarts}", markup=False, highlight=False)
    if driver["log"]:
        console.print(f"driver log: {driver['log']}", markup=False, highlight=False, soft_wrap=True)
    if driver["host_unreachable_since"]:
        console.print(
            f"[bold red]host {escape(str(driver['host']))} unreachable since {driver['host_unreachable_since']}[/]: "
            "the driver keeps trying, with backoff; the jobs keep running there",
            highlight=False,
        )


def runs_command(json_output: JsonOption = False) -> None:
    """List the runs in the runs folder (EYAS_RUNS_DIR, default ./runs): phase, where each stands, its driver (the
    eyas process driving it: alive, died, ended; a host outage it waits out) and its report."""
    from eyas.graph.life.watch import driver_phrase, runs_listing

    rows = runs_listing(None, time.time())
    if json_output:
        print_json(rows)
        return
    # Each report is runs/<run>/report.md, under the folder the title names: the column says which runs have one.
    table = Table(title=f"runs in {escape(str(runs_root()))}", title_justify="left")
    shown = shown_ids([row["run"] for row in rows], console)
    add_id_column(table, "run", shown)
    for column in ("phase", "state", "driver", "report"):
        table.add_column(column)
    for run_id, row in zip(shown, rows, strict=True):
        report = Path(row["report"]).name if row["report"] else ""
        cells = (run_id, row["phase"], row["state"], driver_phrase(row["driver"]), report)
        table.add_row(*(escape(cell) for cell in cells))
    console.print(table)
    for row in rows:  # whole, below the table: what is wrong and how to recover does not fit a cell
        if row["damage"]:
            console.print(f"[red]{escape(row['damage'])}[/]")


def add_run_readers(app: typer.Typer) -> None:
    """`eyas status` and `eyas runs`, in the order the whole app lists them."""
    app.command("status", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE, ExitCode.NOT_FOUND))(status_command)
    app.command("runs", epilog=exit_codes_help(ExitCode.OK, ExitCode.USAGE))(runs_command)
