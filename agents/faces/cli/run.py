"""`eyas run / resume / approve / graph`: drive pipeline runs (`eyas status` and `eyas runs` are in status.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from eyas.agents.faces.cli.completion import run_argument
from eyas.agents.faces.cli.console import console, errors, json_result, notice, print_json, say_next_steps
from eyas.agents.faces.cli.detach import DetachOption, detach_driver, same_command
from eyas.agents.faces.cli.evaluation_tables import evaluation_table, latency_table
from eyas.agents.faces.cli.flags import ConfigOption, JsonOption
from eyas.agents.faces.cli.options import chosen_sizes, positive_seconds, size_option, use_config
from eyas.graph.life.heartbeat import Heartbeat
from eyas.graph.phases.evaluate.record import run_evaluation
from eyas.graph.policy import AUTO_APPROVE, Policy, load_policy
from eyas.graph.runs import RUN_ID_RULE, RunDir, open_run
from eyas.graph.state import Action, GateAnswer
from eyas.tools.config_source import ConfigSource
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode
from eyas.tools.recording.redact import Redactor
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import POLL_INTERVAL_S, Sizes

# The graph's modules (langgraph, ~0.5 s) load in the commands that use them, not at start-up of every eyas process.
if TYPE_CHECKING:
    from eyas.graph.life.runner import Outcome


def start_run(
    source: ConfigSource,
    config: EyasConfig,
    policy: Policy | None,
    sizes: Sizes,
    *,
    interactive: bool,
    poll_interval_s: float,
    run_id: str | None = None,
) -> Outcome:
    from eyas.graph.life.session import initial_state, new_run, run_meta

    run = new_run(run_id)
    meta = run_meta(source, policy, sizes, poll_interval_s=poll_interval_s)
    first = initial_state(run, config, meta)
    console.print(f"run [bold]{escape(run.run_id)}[/]: files in {escape(str(run.root))}")
    return advance(run, first, interactive=interactive, start=meta)


def advance(run: RunDir, first: Any, *, interactive: bool, start: dict[str, Any] | None = None) -> Outcome:
    """Drive the run from `first` (its first input, or None to continue) and write its report at the end.
    `start` is a new run's meta, written once its context has opened: a run that cannot start leaves no run."""
    from eyas.agents.faces.cli.run_ui import RunUI
    from eyas.agents.faces.report_html.page import write_html_report
    from eyas.graph.life.resume_point import note_resume
    from eyas.graph.life.runner import checkpointer, drive, end_message, notify, thread
    from eyas.graph.life.session import begin_run, open_context
    from eyas.graph.pipeline import build_graph

    meta = start or run.meta()
    ui = RunUI()
    with (
        run.driving(),
        Heartbeat(run) as beat,
        checkpointer(run) as saver,
        open_context(run, meta, on_progress=ui.progress, on_note=ui.note, on_host_outage=beat.host_outage) as ctx,
    ):
        if start is not None:
            begin_run(run, start)
            ctx.boundary.note("run", {"meta": start, "config": ctx.config.model_dump(mode="json"), "input": first})
        graph = build_graph(saver)
        if start is None:  # a resume: the transcript says from which checkpoint, so replay resumes there too
            note_resume(ctx.boundary, graph, thread(run))
        ask = ui.ask if interactive and ctx.policy is None else None
        outcome = drive(graph, ctx, first, ask=ask, on_update=ui.update)
        if outcome.finished:
            run.write_report(outcome.state.get("report", ""))
            console.print(f"[bold green]run {escape(run.run_id)} ended[/]: report in {escape(str(run.report))}")
            if evaluation := run_evaluation(outcome.state):
                run.write_evaluation(outcome.state["evaluation"])
                console.print(evaluation_table(evaluation))
                if evaluation.bench is not None:
                    console.print(latency_table(evaluation.bench))
            print_next_steps(run, outcome.state, ctx.policy or Policy())
        page = write_html_report(run.root, outcome.state)
        beat.ended(Redactor().text(end_message(run, outcome, page)))
        notify(ctx, outcome, page)
    console.print(f"report.html: {escape(str(page))}")
    return outcome


def print_next_steps(run: RunDir, state: dict[str, Any], policy: Policy) -> None:
    """The report's next steps on the run's last screen, from what the run measured."""
    from eyas.graph.phases.deploy.record import deploy_record
    from eyas.graph.phases.report.next_step import run_next_steps

    say_next_steps(run_next_steps(state, deploy_record(run), policy.deploy_min_speedup))


def finish(outcome: Outcome) -> None:
    raise typer.Exit(ending(outcome))


def ending(outcome: Outcome) -> ExitCode:
    """The drive's exit status: done; waiting at a gate; rolled back (production's own counters turned the drafter
    away); or ended early (a refused drafter, a rejected phase, a path that cannot work here, an aborted job, a
    deploy that failed), which is a no: a script must not read a stopped run, or a drafter not kept, as a done one."""
    from eyas.graph.phases.deploy.record import deploy_record
    from eyas.graph.phases.report.deploy_facts import deploy_facts

    if not outcome.finished:
        return ExitCode.GATE
    stopped = outcome.state.get("stopped")
    if stopped:
        errors.print(f"[bold red]run stopped before its end[/]: {escape(str(stopped))}", highlight=False)
        return ExitCode.NO
    deployed = deploy_facts(outcome.state, deploy_record(open_run(str(outcome.state["run_id"]))))
    if deployed.status == "rolled_back":
        return ExitCode.ROLLED_BACK
    return ExitCode.NO if deployed.status == "failed" else ExitCode.OK


def run_command(
    config: ConfigOption = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            help="TOML policy for an unattended run: budgets per gate, notify command. Without it, "
            "each gate asks in this terminal."
        ),
    ] = None,
    auto_approve: Annotated[
        bool,
        typer.Option(
            help="approve every gate whose plan fits (no budgets); the deploy gate still asks (a policy file's "
            'deploy = "auto" approves it)'
        ),
    ] = False,
    samples: Annotated[int | None, size_option("samples")] = None,
    max_tokens: Annotated[int | None, size_option("max_tokens")] = None,
    max_seq_len: Annotated[int | None, size_option("max_seq_len")] = None,
    concurrency: Annotated[int | None, size_option("concurrency")] = None,
    draft_vocab_size: Annotated[int | None, size_option("draft_vocab_size")] = None,
    epochs: Annotated[int | None, size_option("epochs")] = None,
    ttt_steps: Annotated[int | None, size_option("ttt_steps")] = None,
    num_speculative_tokens: Annotated[int | None, size_option("num_speculative_tokens", "--k")] = None,
    eval_k_from: Annotated[int | None, size_option("eval_k_from")] = None,
    eval_max_tokens: Annotated[int | None, size_option("eval_max_tokens")] = None,
    eval_ngram: Annotated[bool | None, size_option("eval_ngram", "--eval-ngram/--no-eval-ngram")] = None,
    prompt_source: Annotated[str | None, size_option("prompt_source", "--prompts")] = None,
    held_out: Annotated[int | None, size_option("held_out")] = None,
    bench_prompts: Annotated[int | None, size_option("bench_prompts")] = None,
    extraction_backend: Annotated[str | None, size_option("extraction_backend")] = None,
    extraction_mode: Annotated[str | None, size_option("extraction_mode")] = None,
    online_window: Annotated[int | None, size_option("online_window")] = None,
    poll_interval: Annotated[
        float, typer.Option(help="seconds between job polls", callback=positive_seconds)
    ] = POLL_INTERVAL_S,
    run_id: Annotated[str | None, typer.Option(help=f"name the run: {RUN_ID_RULE} (default: run-<time>-<hex>)")] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="walk the plan without launching anything: each phase's jobs and exact commands, the GPUs they "
            "need, what happens to production, and the argv of every vLLM server eyas would start",
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="with --dry-run: print it as JSON")] = False,
    detach: DetachOption = False,
    *,
    command: typer.Context,
) -> None:
    """Start a pipeline run: research, verify, plan, then generation, extraction, training and evaluation,
    each behind an approval gate. Checkpointed after every step: after any crash, `eyas resume RUN`."""
    from eyas.graph.dry_run import dry_run as dry_run_walk
    from eyas.graph.life.session import new_run

    chosen = load_policy(policy) if policy else (AUTO_APPROVE if auto_approve else None)
    cfg, source = use_config(config)
    sizes = chosen_sizes(
        source.path is None, samples=samples, max_tokens=max_tokens, max_seq_len=max_seq_len,
        concurrency=concurrency, draft_vocab_size=draft_vocab_size, epochs=epochs,
        ttt_steps=ttt_steps, num_speculative_tokens=num_speculative_tokens, eval_max_tokens=eval_max_tokens,
        eval_k_from=eval_k_from, eval_ngram=eval_ngram,
        prompt_source=prompt_source or cfg.pipeline.prompts, held_out=held_out, bench_prompts=bench_prompts,
        extraction_backend=extraction_backend or cfg.pipeline.extraction_backend,
        extraction_mode=extraction_mode or cfg.pipeline.extraction_mode,
        online_window=online_window,
    )  # fmt: skip
    if dry_run:
        walk = dry_run_walk(cfg, sizes)
        print_dry_run(walk, json_output)
        raise typer.Exit(ExitCode.NO if walk["stops"] else ExitCode.OK)
    if json_output:
        raise typer.BadParameter("--json goes with --dry-run (a run prints its progress; see `eyas status --json`)")
    if detach:
        run = new_run(run_id)
        detach_driver(run, [*same_command(command, without={"detach", "run_id"}), "--run-id", run.run_id])
        return
    interactive = sys.stdin.isatty()
    finish(start_run(source, cfg, chosen, sizes, interactive=interactive, poll_interval_s=poll_interval, run_id=run_id))


def print_dry_run(walk: dict[str, Any], as_json: bool) -> None:
    from eyas.graph.dry_run import dry_run_lines

    if as_json:
        print_json(walk)
        return
    # Soft-wrapped: the terminal folds a long command, but a pipe or a copy gets it on one line, as it would run.
    for line in dry_run_lines(walk):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def resume_command(
    run_id: Annotated[str, run_argument("the run to continue (see `eyas runs`)")],
    detach: DetachOption = False,
) -> None:
    """Continue a run from its last checkpoint: finished work is not redone, running jobs are re-attached,
    nothing is launched twice. Answers recorded with `eyas approve` are applied first."""
    from eyas.graph.life.run_source import run_source

    run = open_run(run_id)
    if not run.checkpoints.exists():
        kind = run.meta().get("kind") or "pipeline"
        raise EyasError(
            f"Run {run_id} has no checkpoint to continue from: it is a {kind} run that never drove the pipeline. "
            "Start a pipeline run with `eyas run`."
        )
    if detach:
        detach_driver(run, ["resume", run.run_id])
        return
    notice(run_source(run.meta()).describe())
    finish(advance(run, None, interactive=sys.stdin.isatty()))


def approve_command(
    run_id: Annotated[str, run_argument("the run waiting at a gate")],
    reject: Annotated[bool, typer.Option(help="reject the phase instead (the run ends with its report)")] = False,
    retry: Annotated[bool, typer.Option(help="at a failure gate: relaunch the failed jobs (they resume)")] = False,
    abort: Annotated[bool, typer.Option(help="at a failure gate: end the run")] = False,
    reason: Annotated[str, typer.Option(help="why; kept in the report")] = "",
    json_output: JsonOption = False,
) -> None:
    """Answer the gate a run waits at, from any terminal. A run waiting in another terminal continues at once;
    a stopped one continues with `eyas resume RUN`."""
    from eyas.graph.life.answers import pending_view, record_gate_answer

    run = open_run(run_id)
    _, view = pending_view(run)
    action: Action
    if view.get("kind") == "failure":
        if retry == abort:
            raise typer.BadParameter("a failure gate takes exactly one of --retry or --abort")
        action = "retry" if retry else "abort"
    else:
        if retry or abort:
            raise typer.BadParameter("--retry and --abort answer failure gates; this is an approval gate")
        action = "reject" if reject else "approve"
    with json_result(json_output) as result:
        record_gate_answer(run, GateAnswer(action=action, reason=reason, who="cli"))
        driven = run.is_driven()
        where = "the waiting eyas process continues now" if driven else f"continue with `eyas resume {run_id}`"
        console.print(f"{action} recorded for the {view.get('phase')} gate of {run_id}; {where}")
        result.update(run_id=run_id, gate=view.get("phase"), kind=view.get("kind") or "approval", action=action,
                      reason=reason, continues="now" if driven else "on resume")  # fmt: skip


def graph_command(
    mermaid: Annotated[
        bool, typer.Option("--mermaid/--json", help="a Mermaid diagram (default), or nodes and edges as JSON")
    ] = True,
) -> None:
    """Print the pipeline's state machine: paste the Mermaid text into any Mermaid viewer (GitHub renders it),
    or read --json from a script."""
    from eyas.graph.pipeline import build_graph

    drawable = build_graph().get_graph()
    if mermaid:
        print(drawable.draw_mermaid())
        return
    edges = [{"source": edge.source, "target": edge.target, "conditional": edge.conditional} for edge in drawable.edges]
    print_json({"nodes": sorted(drawable.nodes), "edges": edges})
