"""`eyas deploy RUN` and `eyas rollback RUN`: put a run's drafter into production by hand, or take it out.

The same steps the pipeline's deploy phase takes after its gate (graph/phases/deploy/node.py, tools/service/deploy.py),
shown the same way: production's argv before and after, the drop-in, the expected downtime. Both ask before they
restart production (a restart's cost falls on production's users), `--yes` answers for a script, and `--dry-run`
prints the exact commands and changes nothing. The outcome is kept in the run's folder as deploy.json (owner-only),
which the report shows as production before and after.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from pydantic import ValidationError
from rich.markup import escape

from eyas.agents.faces.cli.completion import run_argument
from eyas.agents.faces.cli.console import console, json_result, say
from eyas.agents.faces.cli.deploy_choice import MethodOption, hand_choice
from eyas.agents.faces.cli.flags import JsonOption
from eyas.graph.policy import Policy, started_policy
from eyas.graph.runs import RunDir, open_run
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.clock import SYSTEM_CLOCK
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.service.choose import production_service
from eyas.tools.service.deploy import deploy, rollback
from eyas.tools.service.deploy_result import DeployResult
from eyas.tools.service.keep_rule import method_words
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import format_validation_error
from eyas.tools.workloads.speculative import DRAFTER_METHOD, NGRAM_METHOD

if TYPE_CHECKING:
    from eyas.graph.context import RunContext

_DEFAULT = Thresholds()  # the deploy's own defaults, which a run without a policy is held to


# The graph's modules (langgraph, ~0.5 s) load in the functions that use them, not at start-up of every eyas process.
def save(run: RunDir, result: DeployResult) -> None:
    """deploy.json, and the report's deploy section: production before and after."""
    from eyas.agents.faces.report_html.page import write_html_report
    from eyas.graph.life.run_view import read_run
    from eyas.graph.phases.deploy.node import save_result
    from eyas.graph.phases.report.next_step import run_next_steps
    from eyas.graph.phases.report.node import with_deploy

    save_result(run, result)
    view = read_run(run)
    state = view.state if view.started else None
    min_speedup = started_policy(run.meta()).deploy_min_speedup
    steps = run_next_steps(state or {}, result, min_speedup)
    report = run.report.read_text() if run.report.exists() else f"# eyas run {run.run_id}\n"
    run.write_report(with_deploy(report, result, steps))
    write_html_report(run.root, state)


def print_result(result: DeployResult) -> None:
    after = result.after
    if after is not None and after.mean_acceptance_length is not None:
        console.print(
            f"production's own counters: mean acceptance length {after.mean_acceptance_length:.3f}, acceptance "
            f"rate {after.acceptance_rate or 0:.3f} over {after.requests} requests; {after.tokens_per_s:.1f} tokens/s"
            + (f" (before: {result.before.tokens_per_s:.1f})" if result.before else "")
        )
    verdict = "[green]kept[/]" if result.kept else "[yellow]rolled back[/]"
    method = "n-gram speculation" if result.method == NGRAM_METHOD else "drafter"
    console.print(f"{method} {verdict}: {escape(result.reason)}", soft_wrap=True)


def refuse_unasked(yes: bool, dry_run: bool, command: str) -> None:
    """A restart of production is asked for at a terminal; where stdin is none (a script, a pipe, cron) nobody can
    answer, so it needs --yes, said before eyas reaches the host."""
    if yes or dry_run or (sys.stdin is not None and sys.stdin.isatty()):
        return
    raise EyasError(
        f"`eyas {command}` restarts production and asks first, but its input is not a terminal, so nobody can "
        f"answer: pass --yes to {command} without asking (as a script does), or --dry-run to see what it would do."
    )


def confirmed(yes: bool, question: str) -> bool:
    """--yes, or a person's yes at the terminal; anything else (no, Enter, end of input) leaves production as it is."""
    if yes:
        return True
    try:
        return typer.confirm(question, default=False)
    except typer.Abort:  # Ctrl-C or end of input at the prompt
        say("")
        return False


def chosen_thresholds(policy: Policy, chosen: dict[str, Any]) -> Thresholds:
    """The run's policy's thresholds with the flags given on the command line; a bad one is one paragraph."""
    given = {name: value for name, value in chosen.items() if value is not None}
    try:
        return Thresholds.model_validate({**policy.deploy_thresholds().model_dump(), **given})
    except ValidationError as exc:
        raise EyasError(f"Those thresholds are not valid: {'; '.join(format_validation_error(exc))}.") from None


@contextmanager
def production(run: RunDir) -> Iterator[RunContext]:
    """The run's config and host, as the deploy phase sees them (nothing recorded: a deploy by hand is no node)."""
    from eyas.graph.context import RunContext
    from eyas.graph.life.run_source import run_source

    config = run_source(run.meta()).load()
    http = HttpClient(SYSTEM_CLOCK)
    with open_host(config.target.host, config.host()) as host:
        yield RunContext(config=config, host=host, http=http, clock=SYSTEM_CLOCK, run=run)


def show_numbered(title: str, commands: list[str]) -> None:
    say(title)
    for number, command in enumerate(commands, 1):
        lines = command.splitlines() or [""]
        say(f"  {number}. {lines[0]}")
        for line in lines[1:]:
            say(f"     {line}")


def show_text(title: str, text: str) -> None:
    say(title)
    for line in text.splitlines():
        say(f"    {line}")


YesOption = Annotated[
    bool,
    typer.Option(
        "--yes", "-y", help="restart production without asking (for scripts; needed when stdin is not a terminal)"
    ),
]


def deploy_command(
    run_id: Annotated[str, run_argument("the run whose trained drafter goes into production")],
    drafter: Annotated[
        str | None,
        typer.Option(help="deploy this drafter directory on the host (default: the run's, where the drafter wins)"),
    ] = None,
    method: MethodOption = None,
    k: Annotated[
        int | None,
        typer.Option(min=1, help="speculative tokens per step (default: the winner's k, else the run's)"),
    ] = None,
    min_acceptance_length: Annotated[
        float | None,
        typer.Option(
            help="keep the drafter only at this mean acceptance length or above, on production's own counters "
            f"(default: the run's policy's deploy_min_acceptance_length, else {_DEFAULT.min_acceptance_length:g})"
        ),
    ] = None,
    min_speedup: Annotated[
        float | None,
        typer.Option(
            help="and only when production's tokens/s with the drafter over its tokens/s without reach this "
            f"(default: the run's policy's deploy_min_speedup, else {_DEFAULT.min_speedup:g}: never slower; lower it "
            "to keep a drafter that is)"
        ),
    ] = None,
    ngram_margin: Annotated[
        float | None,
        typer.Option(
            help="and only when that speedup exceeds n-gram speculation's speedup in the run's evaluation by this "
            f"(default: the run's policy's deploy_ngram_margin, else {_DEFAULT.ngram_margin:g}; no bar where the "
            "evaluation did not measure n-gram)"
        ),
    ] = None,
    probe_requests: Annotated[
        int | None,
        typer.Option(
            min=1, help=f"probe requests per measurement window (default: the policy's, else {_DEFAULT.probe_requests})"
        ),
    ] = None,
    probe_max_tokens: Annotated[
        int | None, typer.Option(min=1, help=f"longest probe answer, in tokens (default {_DEFAULT.probe_max_tokens})")
    ] = None,
    yes: YesOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="print the exact commands, the drop-in and production's argv before and after, and change nothing",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Put the evaluation's winner into production, keep it only if production's own counters say so.

    The winner is what the deploy gate proposes: the fastest of the target alone, n-gram speculation and the drafter
    at each k the evaluation measured, by the run's policy; --method and --k deploy another on purpose.

    Measures production over probe requests, adds a drop-in to its service that sets --speculative-config to the
    drafter, restarts it, waits for the deep health check, measures again from production's own /metrics, and
    keeps the drafter only at the thresholds: the mean acceptance length, and a speedup (tokens/s with the drafter
    over without) of at least the policy's deploy_min_speedup, so by default production never ends up slower, that
    also beats the speedup vLLM's n-gram speculation reached in the run's evaluation by deploy_ngram_margin.
    Otherwise it removes exactly that drop-in and restarts production with its old command line.

    It shows production's argv before and after, the drop-in and the expected downtime, and asks before the
    restart; --yes skips the question (a script, whose stdin is no terminal, must pass it), --dry-run prints the
    exact commands and stops.

    \b
    Examples:
      eyas deploy RUN --dry-run            # what would change, exactly; nothing restarts
      eyas deploy RUN                      # the same, then asks before the restart
      eyas deploy RUN --yes --min-speedup 1.1
    After an error, production is untouched unless the message says otherwise.
    """
    from eyas.graph.life.run_view import read_run
    from eyas.graph.phases.deploy.node import expected_restart, planned_change, steps
    from eyas.graph.state import RunState

    run = open_run(run_id)
    state = cast(RunState, read_run(run).state)
    drafter_dir = drafter or state.get("artifacts", {}).get("drafter")
    policy = started_policy(run.meta())
    # A drafter named on the command line is what is asked for; otherwise the method given, else the winner.
    asked = method.value if method else (DRAFTER_METHOD if drafter else None)
    picked = hand_choice(run.run_id, state, policy, drafter_dir or "", asked, k)
    if picked.method == DRAFTER_METHOD and not drafter_dir:
        raise EyasError(f"Run {run_id} has no trained drafter: pass --drafter DIR (a directory on the target host).")
    chosen = {"min_acceptance_length": min_acceptance_length, "min_speedup": min_speedup,
              "ngram_margin": ngram_margin, "probe_requests": probe_requests,
              "probe_max_tokens": probe_max_tokens}  # fmt: skip
    thresholds = chosen_thresholds(policy, chosen)
    what = method_words(picked.method) + (f" {drafter_dir}" if picked.method == DRAFTER_METHOD else "")
    refuse_unasked(yes, dry_run, "deploy")
    with json_result(json_output) as out:
        out["run_id"] = run.run_id
        with production(run) as ctx:
            service, planned = planned_change(ctx, picked.speculative, state)
            deploy_steps, rollback_steps = steps(ctx, planned, thresholds, picked.ngram_speedup, method=picked.method)
            restart_s, source = expected_restart(ctx, state)
            say(f"eyas deploy {run.run_id}: {service.name} ({service.backend}) restarts with {what} (k={picked.k})")
            say(f"  chosen:      {picked.why}")
            say(f"  argv before: {shlex.join(planned.argv_before)}")
            say(f"  argv after:  {shlex.join(planned.argv_deployed)}")
            say(f"  drop-in:     {planned.drop_in}")
            say(f"  downtime:    about {restart_s:.0f} s per restart, {source}; a rollback restarts once more")
            rule = thresholds.keep_rule(picked.ngram_speedup, picked.method).sentence()
            say(f"  kept at:     {rule} on production's own counters, else rolled back")
            if dry_run:
                show_text(f"the drop-in {planned.drop_in} would hold:", planned.drop_in_text)
                show_numbered("the deploy, step by step:", deploy_steps)
                show_numbered("the rollback (after a missed threshold, a failed start or probe, or `eyas rollback`):",
                              rollback_steps)  # fmt: skip
                say(f"dry run: nothing was changed; `eyas deploy {run.run_id}` does the above (asking first).")
                out.update(dry_run=True, service=service.name, method=picked.method, chosen=picked.why,
                           drafter=drafter_dir if picked.method == DRAFTER_METHOD else None, k=picked.k,
                           argv_before=planned.argv_before, argv_after=planned.argv_deployed, drop_in=planned.drop_in,
                           drop_in_text=planned.drop_in_text, restart_s=restart_s, deploy_steps=deploy_steps,
                           rollback_steps=rollback_steps)  # fmt: skip
                return
            if not confirmed(yes, f"Restart {service.name} with {method_words(picked.method)} now?"):
                say(f"not deployed: {service.name} untouched.")
                out.update(dry_run=False, confirmed=False)
                raise typer.Exit(ExitCode.NO)
            result = deploy(service, ctx.config.target, ctx.http, ctx.clock, picked.speculative, thresholds, say,
                            picked.ngram_speedup)  # fmt: skip
        save(run, result)
        print_result(result)
        out.update(dry_run=False, confirmed=True, kept=result.kept, result=result.model_dump(mode="json"))
        raise typer.Exit(ExitCode.OK if result.kept else ExitCode.ROLLED_BACK)


def rollback_command(
    run_id: Annotated[str, run_argument("the run whose drafter eyas deployed")],
    yes: YesOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="print the exact commands, the drop-in to remove and production's argv "
            "before and after, and change nothing",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Take the drafter eyas deployed out of production: its old command line again, checked.

    Removes the drop-in `eyas deploy` added (and nothing else), restarts production, waits for the deep health
    check, and checks that production runs its old command line. It shows production's argv before and after, the
    drop-in it removes and the expected downtime, and asks before the restart; --yes skips the question (a
    script, whose stdin is no terminal, must pass it), --dry-run prints the exact commands and stops. Where no
    drafter is deployed it says so and restarts nothing.

    \b
    Examples:
      eyas rollback RUN --dry-run
      eyas rollback RUN --yes
    """
    from eyas.graph.life.run_view import read_run
    from eyas.graph.phases.deploy.node import expected_restart, rollback_steps
    from eyas.graph.phases.deploy.record import deploy_record
    from eyas.graph.state import RunState

    run = open_run(run_id)
    earlier = deploy_record(run)
    refuse_unasked(yes, dry_run, "rollback")
    with json_result(json_output) as out:
        out["run_id"] = run.run_id
        with production(run) as ctx:
            service = production_service(ctx.config, ctx.host, ctx.http, ctx.clock)
            path = service.drop_in_path()
            argv = service.effective_unit().exec_start
            if not ctx.host.exists(path):
                say(f"no drafter is deployed on {service.name} ({path} is absent): nothing to roll back, nothing "
                    f"restarted. It runs {shlex.join(argv)}")  # fmt: skip
                out.update(dry_run=dry_run, deployed=False, service=service.name, argv=argv)
                return
            text = ctx.host.read_text(path)
            restart_s, source = expected_restart(ctx, cast(RunState, read_run(run).state))
            ours = earlier is not None and earlier.drop_in == path and earlier.drop_in_text == text
            say(f"eyas rollback {run.run_id}: {service.name} ({service.backend}) restarts without the drafter")
            say(f"  argv before: {shlex.join(argv)}")
            after = "its unit's command line without the drop-in (checked after the restart)"
            say(f"  argv after:  {shlex.join(earlier.argv_before) if earlier is not None and ours else after}")
            say(f"  drop-in:     {path} (removed)")
            say(f"  downtime:    about {restart_s:.0f} s, {source}")
            if dry_run:
                show_text(f"the drop-in {path} holds now:", text)
                show_numbered("the rollback, step by step:", rollback_steps(ctx, path))
                say(f"dry run: nothing was changed; `eyas rollback {run.run_id}` does the above (asking first).")
                out.update(
                    dry_run=True,
                    deployed=True,
                    service=service.name,
                    argv_before=argv,
                    drop_in=path,
                    drop_in_text=text,
                    restart_s=restart_s,
                    rollback_steps=rollback_steps(ctx, path),
                )
                return
            if not confirmed(yes, f"Restart {service.name} without the drafter now?"):
                say(f"not rolled back: {service.name} untouched.")
                out.update(dry_run=False, deployed=True, confirmed=False)
                raise typer.Exit(ExitCode.NO)
            # Checked against the argv this run's deploy replaced when the drop-in is the one it wrote.
            result = rollback(service, Thresholds(), say, earlier if ours else None)
        saved = result.model_copy(update={"reason": "rolled back by hand"})
        save(run, saved)
        say(f"production is back to {shlex.join(result.argv_before)}")
        out.update(dry_run=False, deployed=True, confirmed=True, result=saved.model_dump(mode="json"))
