"""`eyas plan`: the hours and bytes a run needs, and whether they fit, before anything expensive starts."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from eyas.agents.faces.cli.console import console, errors, print_json
from eyas.agents.faces.cli.flags import ConfigOption
from eyas.agents.faces.cli.options import chosen_sizes, size_option, use_config
from eyas.tools.checks.drafter import check_drafter
from eyas.tools.checks.result import CheckContext, Status
from eyas.tools.errors import EyasError
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.connect import open_host
from eyas.tools.hosts.host import Host
from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.estimate import Plan, estimate
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode, choose_mode, mode_verdict, offered
from eyas.tools.planning.measure import Measured, measure_inputs
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.planning.prompt_supply import PromptSupply, supply_verdict
from eyas.tools.planning.served import ServerDown
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import SIZE_LIMITS
from eyas.tools.settings.units import format_hours, format_size, parse_size


def plan_table(
    measured: Measured,
    plan: Plan,
    supply: PromptSupply,
    mode: HiddenStatesMode,
    hours: dict[str, float | None],
    total: float,
) -> Table:
    """The plan as a table: each figure, and where it came from; the hours are the chosen mode's (`hours` by phase,
    with the servers each loads), one set, and the whole run's `total`."""
    inputs, sources = measured.inputs, {**measured.sources, "prompt_supply": supply.counted}
    model = inputs.model
    table = Table(title="plan", title_justify="left")
    for column in ("", "estimate", "from"):
        table.add_column(column, overflow="fold")
    overhead = f" + {inputs.generation_overhead_s:.2f} s per request" if inputs.generation_overhead_s else ""
    how = {"measured": "average", "sampled": "expected", "max_tokens": "at most"}[plan.tokens_from]
    per_sample = f"{plan.tokens_per_sample:,.0f} tokens ({how})"
    context = f"{measured.context.tokens:,} tokens" if measured.context else "not known"
    rows = [
        ("model", f"hidden {model.hidden_size:,}, {model.num_layers} layers, vocab {model.vocab_size:,}", "model"),
        ("served context", context, "max_model_len"),
        ("samples", f"{plan.samples:,} x {per_sample}", "tokens" if "tokens" in sources else "max_tokens"),
        ("prompt", f"{inputs.prompt_tokens:,.0f} tokens on average", "prompt_tokens"),
        ("prompts", prompts_row(supply), "prompt_supply"),
        ("captured layers", f"{plan.captured_layers} x {inputs.bytes_per_value} B per value", ""),
        ("generation throughput", f"{inputs.generation_tok_s:,.1f} tokens/s{overhead}", "throughput"),
        ("generation", shown_hours(hours["data"]), "answers" if "answers" in sources else ""),
        (
            "extraction (prefill)",
            f"{shown_hours(hours['extract'])} at {inputs.extraction_rate:,.0f} tokens/s",
            "extraction",
        ),
        ("training", f"{shown_hours(hours['train'])} ({inputs.epochs} epochs, {mode.mode})", "training"),
        ("evaluation", shown_hours(hours.get("evaluate")), ""),
        ("whole run", format_hours(total), ""),
        ("hidden states", format_size(plan.hidden_state_bytes), ""),
        ("hidden states mode", mode.reason, ""),
        ("generated data + checkpoints", format_size(plan.data_bytes + plan.checkpoint_bytes), ""),
        (f"free at {plan.data_path}", format_size(plan.free_disk_bytes), "free_disk"),
        ("left afterwards", format_size(plan.free_disk_bytes - mode.needed_bytes), ""),
    ]
    for name, value, source in rows:
        table.add_row(escape(name), escape(value), escape(sources.get(source, "")))
    return table


def hours_json(hours: dict[str, float | None], total: float) -> dict[str, float | None]:
    """The chosen mode's hours at the top level of `eyas plan --json`, named as the estimate names them, and the
    whole run's (the offline estimate's are under offline_*)."""
    names = {"data": "generation", "extract": "extraction", "train": "training", "evaluate": "evaluation"}
    return {**{f"{names[phase]}_hours": value for phase, value in hours.items()}, "total_hours": total}


def shown_hours(hours: float | None) -> str:
    return "not planned (no host to measure)" if hours is None else format_hours(hours)


def refuse_empty_source(supply: PromptSupply) -> None:
    """A prompt source without one usable prompt (an empty file, lines of garbage) is refused before anything is
    measured: no plan can use it, and the probes of a served model would keep the operator waiting for minutes."""
    if supply.available == 0:
        raise EyasError(f"{supply_verdict(supply)} Nothing was measured.")


def prompts_row(supply: PromptSupply) -> str:
    """The prompt supply as the table's row: available against asked."""
    if supply.available is None:
        return f"{supply.asked:,} asked, not counted"
    at_least = "" if supply.whole else "at least "
    short = "" if supply.enough else " (too few)"
    return f"{at_least}{supply.available:,} in the {supply.source} source for {supply.asked:,} asked{short}"


def plan_command(
    config: ConfigOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
    hidden_size: Annotated[int | None, typer.Option(help="target hidden size (default: its config.json)")] = None,
    num_layers: Annotated[int | None, typer.Option(help="target decoder layers (default: its config.json)")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="target vocabulary (default: its config.json)")] = None,
    samples: Annotated[int | None, size_option("samples")] = None,
    max_tokens: Annotated[int | None, size_option("max_tokens")] = None,
    max_seq_len: Annotated[int | None, size_option("max_seq_len")] = None,
    epochs: Annotated[int | None, size_option("epochs")] = None,
    ttt_steps: Annotated[int | None, size_option("ttt_steps")] = None,
    draft_vocab_size: Annotated[int | None, size_option("draft_vocab_size")] = None,
    prompt_source: Annotated[str | None, size_option("prompt_source", "--prompts")] = None,
    extraction_mode: Annotated[str | None, size_option("extraction_mode")] = None,
    online_window: Annotated[int | None, size_option("online_window")] = None,
    concurrency: Annotated[int | None, size_option("concurrency")] = None,
    prompt_tokens: Annotated[
        float | None,
        typer.Option(help="average prompt in tokens, chat template included (default: the server tokenizes a sample)"),
    ] = None,
    free_disk: Annotated[
        str | None, typer.Option(help="free space where the data goes, e.g. 2.9TB or 2.6TiB (default: df on the host)")
    ] = None,
    throughput: Annotated[
        float | None, typer.Option(help="generation throughput, completion tokens/s (default: a probe of the server)")
    ] = None,
    prefill_throughput: Annotated[
        float | None,
        typer.Option(
            help="extraction's prefill rate, prompt tokens/s (default: the probe's wave of long prompts, else assumed "
            "from the GPUs' FLOP/s)"
        ),
    ] = None,
    generated: Annotated[
        str | None, typer.Option(help="a generate.py output on the host: plan with its measured token counts")
    ] = None,
    data_path: Annotated[str | None, typer.Option(help="where the data will go on the host (default: workdir)")] = None,
    probe_concurrency: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=SIZE_LIMITS["concurrency"],
            help="requests in flight during the throughput probe (default: the run's --concurrency, as generation "
            "will send them: a GPU server decodes several times faster at 200 requests than at 16)",
        ),
    ] = None,
) -> None:
    """Estimate generation, extraction and training time and the disk the hidden states need, and say whether it
    fits. Figures not given are measured: the model's config.json where the server loaded it, df where the data
    goes, a short burst of real completions (and a wave of long prompts for extraction's prefill); on a host without
    GPUs, extraction and training are timed at the run's shapes (--max-seq-len, --draft-vocab-size) and kept for a
    week. With the server down, the model is read from target.model_dir and the rates are assumed from its weights
    and the GPUs (the sources say so). Refuses sizes the server's max_model_len cannot take. Give every figure to
    plan for a host that cannot be reached. When the hidden states do not fit the disk, --extraction-mode auto plans
    hybrid or online training (the states fetched from an extraction server every epoch). From the host's GPUs it
    says what the GPU phases mean for production: each downtime window (back-to-back phases stopped once and
    started once), its hours with production's load counted once. Says no when the plan does not fit, and names the
    ways out (fewer or shorter samples, online training, another path)."""
    # The graph's modules (langgraph) load here, not at start-up of every eyas process.
    from eyas.agents.faces.cli.plan_downtime import downtime_row, host_plan_context, production_downtime
    from eyas.graph.phases.plan.node import made_plan, whole_run

    try:
        free_bytes = parse_size(free_disk) if free_disk else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--free-disk") from None
    cfg, source = use_config(config)
    sizes = chosen_sizes(
        source.path is None,
        samples=samples,
        max_tokens=max_tokens,
        max_seq_len=max_seq_len,
        epochs=epochs,
        ttt_steps=ttt_steps,
        draft_vocab_size=draft_vocab_size,
        prompt_source=prompt_source or cfg.pipeline.prompts,
        extraction_mode=extraction_mode or cfg.pipeline.extraction_mode,
        online_window=online_window,
        concurrency=concurrency,
    )
    figures = given_figures(
        hidden_size=hidden_size,
        num_layers=num_layers,
        vocab_size=vocab_size,
        **planned_sizes(sizes),
        free_disk_bytes=free_bytes,
        generation_tok_s=throughput,
        prefill_tok_s=prefill_throughput,
        prompt_tokens=prompt_tokens,
        generated_file=generated,
        data_path=data_path,
    )

    refuse_unusable_drafter(cfg)

    def measure(host: Host | None) -> tuple[Measured, PromptSupply]:
        def measured_with(down: str | None = None) -> Measured:
            return measure_inputs(
                figures, config=cfg, host=host, http=HttpClient(), probe_concurrency=probe_concurrency, server_down=down
            )

        checks = None if host is None else CheckContext(
            host=host, host_config=cfg.host(), target=cfg.target, http=HttpClient(),
            data_path=figures.data_path or cfg.host().workdir,
        )  # fmt: skip
        supply = count_prompts(checks, figures)  # first: the probes take minutes on a served model
        refuse_empty_source(supply)
        try:
            measured = measured_with()
        except ServerDown as exc:  # stopped or loading: planned from target.model_dir, the rates assumed
            measured = measured_with(str(exc))
        return measured, supply

    production = None  # what the phases mean for production: only the host's GPUs say
    if figures.complete and not generated:
        measured, supply = measure(None)  # nothing to ask the host: it need not be reachable
        plan = estimate(measured.inputs)
        # Whether this host's vLLM has extract_hidden_states is verify's to say (`eyas run` knows): not known here.
        mode = choose_mode(sizes.extraction_mode, measured.inputs, plan, None)
        hours: dict[str, float | None] = {
            "data": plan.generation_hours, "extract": mode.extract_hours, "train": mode.train_hours, "evaluate": None,
        }  # fmt: skip
        total, whole = whole_run(hours, None)
        said = f"{mode_verdict(measured.inputs, plan, mode)} {supply_verdict(supply)}{measured.down_note} {whole}"
    else:
        with open_host(cfg.target.host, cfg.host()) as host, host_plan_context(cfg, host, sizes) as (ctx, state):
            measured, supply = measure(host)
            run = made_plan(ctx, state, measured, supply)  # the run's own plan: one verdict, one total
        plan, production = estimate(measured.inputs), production_downtime(run)
        assert run.extraction_mode is not None and run.verdict is not None and run.total_hours is not None
        mode, said, total = run.extraction_mode, run.verdict, run.total_hours
        hours = {phase: run.phase(phase).phase_hours for phase in ("data", "extract", "train", "evaluate")}
    works = mode.fits and supply.enough is not False
    if json_output:
        shown = {**plan_json(measured, plan, supply, mode), "verdict": said, **hours_json(hours, total)}
        print_json(shown if production is None else {**shown, "production": production})
    else:
        table = plan_table(measured, plan, supply, mode, hours, total)
        if production is not None:
            table.add_row("production downtime", escape(downtime_row(production)), "")
        console.print(table)
        style = "green" if works else "bold red"
        console.print(f"[{style}]{escape(said)}[/]", highlight=False)
    raise typer.Exit(ExitCode.OK if works else ExitCode.NO)


# The flag that gives each figure of the host, to name it when its value is refused.
FIGURE_FLAGS = {
    "hidden_size": "--hidden-size",
    "num_layers": "--num-layers",
    "vocab_size": "--vocab-size",
    "free_disk_bytes": "--free-disk",
    "generation_tok_s": "--throughput",
    "prefill_tok_s": "--prefill-throughput",
    "prompt_tokens": "--prompt-tokens",
}


def given_figures(**given: Any) -> Figures:
    """The figures as given; one out of its bounds (0, a negative count, nan, inf) is a bad flag, said with the flag
    and the fix in one paragraph (`Figures` holds the bounds, so the flags and the plan cannot disagree)."""
    try:
        return Figures(**given)
    except ValidationError as exc:
        problems = [
            f"{FIGURE_FLAGS.get(str(item['loc'][0]), str(item['loc'][0]))} is {item['input']}, and "
            f"{item['msg'].removeprefix('Input ')}"
            for item in exc.errors()
        ]
        raise typer.BadParameter(
            f"{'; '.join(problems)}. Give the figure as measured, or leave the flag out and eyas measures it on the "
            "host"
        ) from None


def refuse_unusable_drafter(cfg: EyasConfig) -> None:
    """A drafter_base that cannot serve this target ends the plan here, before any hour is planned around it."""
    if not cfg.pipeline.drafter_base:
        return
    with open_host(cfg.target.host, cfg.host()) as host:
        ctx = CheckContext(
            host=host, host_config=cfg.host(), target=cfg.target, http=HttpClient(), data_path=cfg.host().workdir,
            drafter_base=cfg.pipeline.drafter_base,
        )  # fmt: skip
        result = check_drafter(ctx)
    if result.status is Status.FAIL:
        errors.print(f"[bold red]{escape(result.message)}[/]", highlight=False)
        raise typer.Exit(ExitCode.NO)


def plan_json(measured: Measured, plan: Plan, supply: PromptSupply, mode: HiddenStatesMode) -> dict[str, object]:
    """The plan's figures at the top level ("fits" and "needed_bytes" in the chosen mode, "offline_fits" and the
    offline bytes and hours, alternatives, the mode, the prompt supply), then what they came from. The caller adds
    the verdict, the whole run's hours and each phase's, in the chosen mode (`hours`)."""
    offline = plan.model_dump(mode="json")
    return {
        **{key: value for key, value in offline.items() if not key.endswith("_hours")},
        **{f"offline_{key}": value for key, value in offline.items() if key.endswith("_hours")},
        "offline_fits": plan.fits,
        "offline_needed_bytes": plan.needed_bytes,
        "fits": mode.fits,
        "needed_bytes": mode.needed_bytes,
        "disk_left_bytes": plan.free_disk_bytes - mode.needed_bytes,
        "alternatives": [way.model_dump(mode="json") for way in offered(plan.alternatives, mode)],
        "extraction_mode": mode.model_dump(mode="json"),
        "prompt_supply": supply.model_dump(mode="json"),
        "max_model_len": measured.context.model_dump(mode="json") if measured.context else None,
        "inputs": measured.inputs.model_dump(mode="json"),
        "sources": measured.sources,
    }
