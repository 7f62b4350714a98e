"""`eyas deploy RUN` and `eyas rollback RUN`: put a run's drafter into production by hand, or take it out.

The same steps the pipeline's deploy phase takes after its gate (graph/phases/deploy/node.py, tools/service/deploy.py);
the outcome is kept in the run's folder as deploy.json (owner-only), which the report shows as production before
and after.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from eyas.agents.faces.cli.console import console
from eyas.graph.policy import Policy
from eyas.graph.runs import RunDir, open_run
from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import DeployResult, Thresholds, deploy, rollback


# The graph's modules (langgraph, ~0.5 s) load in the functions that use them, not at start-up of every eyas process.
def save(run: RunDir, result: DeployResult) -> None:
    """deploy.json, and the report's deploy section: production before and after."""
    from eyas.agents.faces.report_html.page import write_html_report
    from eyas.graph.life.runner import read_run
    from eyas.graph.phases.deploy.node import save_result
    from eyas.graph.phases.report.node import with_deploy

    save_result(run, result)
    report = run.report.read_text() if run.report.exists() else f"# eyas run {run.run_id}\n"
    run.write_report(with_deploy(report, result.model_dump()))
    view = read_run(run)
    write_html_report(run.root, view.state if view.started else None)


def print_result(result: DeployResult) -> None:
    after = result.after
    if after is not None and after.mean_acceptance_length is not None:
        console.print(
            f"production's own counters: mean acceptance length {after.mean_acceptance_length:.3f}, acceptance "
            f"rate {after.acceptance_rate or 0:.3f} over {after.requests} requests; {after.tokens_per_s:.1f} tokens/s"
            + (f" (before: {result.before.tokens_per_s:.1f})" if result.before else "")
        )
    verdict = "[green]kept[/]" if result.kept else "[yellow]rolled back[/]"
    console.print(f"drafter {verdict}: {escape(result.reason)}")


def deploy_command(
    run_id: Annotated[str, typer.Argument(help="the run whose trained drafter goes into production")],
    drafter: Annotated[str | None, typer.Option(help="the drafter directory on the host (default: the run's)")] = None,
    k: Annotated[int | None, typer.Option(help="speculative tokens per step (default: the run's k)")] = None,
    min_acceptance_length: Annotated[
        float | None, typer.Option(help="keep the drafter only at this mean or above (default: the run's policy)")
    ] = None,
    min_speedup: Annotated[float | None, typer.Option(help="and only at this tokens/s ratio or above")] = None,
    probe_requests: Annotated[int | None, typer.Option(help="probe requests per measurement window")] = None,
    probe_max_tokens: Annotated[int, typer.Option(help="longest probe answer, in tokens")] = 32,
) -> None:
    """Add the drafter to the production service (a drop-in with --speculative-config), restart it, measure
    acceptance from production's own /metrics over probe requests, and roll back unless it passes."""
    from eyas.graph.life.runner import read_run

    run = open_run(run_id)
    state = read_run(run).state
    drafter_dir = drafter or state.get("artifacts", {}).get("drafter")
    if not drafter_dir:
        raise EyasError(f"Run {run_id} has no trained drafter: pass --drafter DIR (a directory on the target host).")
    spec_k = k or int(state.get("sizes", {}).get("num_speculative_tokens", 3))
    chosen = {"min_acceptance_length": min_acceptance_length, "min_speedup": min_speedup,
              "probe_requests": probe_requests, "probe_max_tokens": probe_max_tokens}  # fmt: skip
    policy = Policy.model_validate(run.meta().get("policy") or {})
    thresholds = policy.deploy_thresholds().model_copy(
        update={name: value for name, value in chosen.items() if value is not None}
    )
    result = deploy_run(run, drafter_dir, spec_k, thresholds)
    raise typer.Exit(0 if result.kept else 4)


def deploy_run(run: RunDir, drafter_dir: str, k: int, thresholds: Thresholds) -> DeployResult:
    """Deploy on the run's production service, keep the outcome in the run folder and print it."""
    from eyas.graph.life.session import run_source

    config = run_source(run.meta()).load()
    http = HttpClient(SYSTEM_CLOCK)
    with open_host(config.target.host, config.host()) as host:
        service = production_service(config, host, http, SYSTEM_CLOCK)
        result = deploy(service, config.target, http, SYSTEM_CLOCK, drafter_dir, k, thresholds, console.print)
    save(run, result)
    print_result(result)
    return result


def rollback_command(run_id: Annotated[str, typer.Argument(help="the run whose drafter eyas deployed")]) -> None:
    """Remove the drop-in `eyas deploy` added, restart production and wait until it is healthy again."""
    from eyas.graph.life.session import run_source
    from eyas.graph.phases.deploy.node import DEPLOY_FILE

    run = open_run(run_id)
    config = run_source(run.meta()).load()
    http = HttpClient(SYSTEM_CLOCK)
    with open_host(config.target.host, config.host()) as host:
        service = production_service(config, host, http, SYSTEM_CLOCK)
        previous = run.root / DEPLOY_FILE
        earlier = DeployResult.model_validate(json.loads(previous.read_text())) if previous.exists() else None
        result = rollback(service, Thresholds(), console.print, earlier)
    save(run, result.model_copy(update={"reason": "rolled back by hand"}))
    console.print(f"production is back to {escape(' '.join(result.argv_before))[:200]}")
