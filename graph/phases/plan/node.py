"""Plan with numbers before anything long starts: hours from measured throughput, bytes from the model's
shape, where training's hidden states come from (offline, hybrid or online, by the verified free disk), a verdict
against that disk with the ways out when it does not fit, the prompts the source holds against those asked (with
the ways out when it holds too few), and for each GPU phase the GPUs and memory it needs and what that means for
production (keep it, stop it, or reuse it). With production down (stopped, or still loading past target.load_wait_s)
the plan is made all the same, from target.model_dir, with the rates assumed and the verdict saying so."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate.jobs import measured_k
from eyas.graph.phases.servers import on_gpu, production_checks
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunPlan, RunState, run_sizes
from eyas.tools.checks.health import check_health
from eyas.tools.checks.loading import wait_until_loaded
from eyas.tools.checks.result import Status
from eyas.tools.checks.service import read_unit
from eyas.tools.launch.inherited import inherit_launch
from eyas.tools.planning.backend import BackendChoice, choose_backend
from eyas.tools.planning.downtime_window import one_window
from eyas.tools.planning.estimate import estimate
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.gpu_budget import (
    GpuBudgetInputs,
    GpuFree,
    ProductionLayout,
    budget,
    default_load_s,
    online_train_fit,
    online_unplaceable,
    phase_impact,
    weights_bytes,
)
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode, choose_mode, mode_verdict, offered
from eyas.tools.planning.measure import Measured, measure_inputs
from eyas.tools.planning.model_config import MeasureError, weights_on_disk
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.paths import phase_paths
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.planning.prompt_supply import PromptSupply, supply_verdict
from eyas.tools.planning.served import ServerDown
from eyas.tools.settings.units import figure, format_hours

VLLM_PATH = ("extract", "vllm")  # the compat table's rows for the vllm extraction backend


def plan_node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    figures = _figures(state)
    measured = _measure(ctx, figures)
    supply = count_prompts(production_checks(ctx), figures)
    planned = made_plan(ctx, state, measured, supply).model_dump(mode="json")
    # What it was made from, so that the plan can be made again once the data exists (replan.py).
    return {"phase": "plan", "plan": planned, "measured": measured.model_dump(mode="json")}


def made_plan(ctx: RunContext, state: RunState, measured: Measured, supply: PromptSupply) -> RunPlan:
    """The plan from what was measured (or given) and the prompts counted: the estimate, the hidden states' mode it
    makes possible, each phase's hours, bytes and production impact, and each phase's path."""
    plan = estimate(measured.inputs)
    refusal = online_refusal(ctx, state, measured.inputs.model, measured.weight_bytes)
    mode = choose_mode(run_sizes(state).extraction_mode, measured.inputs, plan, vllm_extraction(state), refusal)
    text = f"{mode_verdict(measured.inputs, plan, mode)} {supply_verdict(supply)}{measured.down_note}"
    ctx.on_note(f"plan: {text}")
    hours: dict[str, float | None] = {
        "data": plan.generation_hours,
        "extract": mode.extract_hours,
        "train": mode.train_hours,
    }
    # The evaluation sends one prompt at a time: the probe's request alone (assumed with production down), else (a
    # figure given) the batch rate.
    tok_s = measured.single_tok_s or measured.inputs.generation_tok_s
    production = production_plan(ctx, state, measured.inputs.model, hours, tok_s, mode, measured.weight_bytes)
    mode = production["extraction_mode"]
    ctx.on_note(f"plan extract: hidden states {mode.reason}")
    planned = production["phase_hours"]  # the mode's hours, each server a phase starts loaded as production loads
    phases: dict[str, dict[str, Any]] = {
        "data": {"phase_hours": planned["data"], "disk_bytes": plan.data_bytes},
        "extract": {"phase_hours": planned["extract"], "disk_bytes": mode.extract_bytes},
        # Training writes its checkpoints, and online holds at most the bound of fetched hidden states besides.
        "train": {"phase_hours": planned["train"], "disk_bytes": plan.checkpoint_bytes + mode.bound_bytes},
        "evaluate": {"phase_hours": production["evaluate_hours"]},
    }
    for phase, impact in production["phases"].items():
        phases[phase]["production"] = impact
    total, said = whole_run({phase: entry["phase_hours"] for phase, entry in phases.items()}, production["load"])
    rate = measured.inputs.generation_tok_s
    text += f" {said} Generation's rate: {rate:,.0f} tokens/s ({measured.sources.get('throughput', 'given')})."
    return RunPlan.model_validate(
        {
            **checked_paths(state, production),
            "extraction_mode": mode,
            "fits": mode.fits,
            "verdict": text,
            "needed_bytes": mode.needed_bytes,
            "free_disk_bytes": plan.free_disk_bytes,
            "total_hours": total,
            "sources": measured.sources,
            "alternatives": [way.model_dump(exclude_none=True) for way in offered(plan.alternatives, mode)],
            # What each gate weighs against the policy's budgets, and what happens to production meanwhile.
            "phases": phases,
            "production_load": production["load"],
            "captured_layers": plan.captured_layers,
            "prompt_supply": supply,
        }
    )


def _figures(state: RunState) -> Figures:
    """What the run gives the plan: its sizes, and what verify and the data phase found."""
    run = run_facts(state)
    return Figures(
        **planned_sizes(run.sizes),
        free_disk_bytes=run.free_disk_bytes,
        generated_file=run.artifact("conversations"),
        trust_remote_code=run.trust_remote_code,
    )


def planned_supply(ctx: RunContext, state: RunState) -> PromptSupply:
    """The prompts the run's source holds against those it asks, counted on the host as the data phase will split
    them (the plan's own, and the dry run's when the server cannot be measured): a run its source cannot feed stops
    at its data gate, before any GPU hour."""
    return count_prompts(production_checks(ctx), _figures(state))


def _measure(ctx: RunContext, figures: Figures) -> Measured:
    """The plan's inputs; a server found still loading is waited for (target.load_wait_s), then asked again. One
    that does not answer by then (stopped, or still loading) is planned without: from target.model_dir, the rates
    assumed."""

    def measure(down: str | None = None) -> Measured:
        return measure_inputs(
            figures, config=ctx.config, host=ctx.host, http=ctx.http, clock=ctx.clock, server_down=down
        )

    try:
        return measure()
    except MeasureError as exc:
        checks = production_checks(ctx)
        health = check_health(checks)
        if health.status is not Status.FAIL:
            raise
        waited = wait_until_loaded(checks, health, ctx.clock, lambda line: ctx.on_note(f"plan: {line}"))
        ctx.on_note(f"plan: {waited.note}")
        if waited.outcome == "healthy":
            return measure()
        if not isinstance(exc, ServerDown):
            raise
        return measure(down=str(exc))


def evaluation_hours(state: RunState, load_s: float, tok_s: float | None) -> float | None:
    """The baseline's server, the drafter's at each k measured (measured_k) and with eval_ngram n-gram's at each k,
    each loading like production and answering every held-out prompt one at a time, then `vllm bench serve`'s
    requests (evaluate_sizes): bench_prompts one at a time, and at the run's concurrency as many rounds as its
    requests fill (a round taken as long as one request). None without a measured throughput."""
    if tok_s is None:
        return None
    sizes = run_sizes(state)
    answers = sizes.held_out + sizes.bench_prompts
    if sizes.bench_prompts and sizes.concurrency > 1:
        answers += -(-max(sizes.bench_prompts, sizes.concurrency) // sizes.concurrency)
    servers = 1 + len(measured_k(sizes)) * (2 if sizes.eval_ngram else 1)
    seconds = servers * (load_s + answers * sizes.eval_max_tokens / tok_s)
    return seconds / 3600


WHOLE_RUN_PARTS = {"data": "generation", "extract": "extraction", "train": "training", "evaluate": "evaluation"}


def whole_run(hours: dict[str, float | None], load: dict[str, Any] | None) -> tuple[float, str]:
    """The one total the text, the JSON, the gates, the dry run and the report show: every phase in the chosen mode
    (with the servers it loads), the evaluation, and the deploy's restart of production (`load`; None: not known,
    as for a plan that contacts no host); with its parts in words."""
    deploy_h = float(load["load_s"]) / 3600 if load else 0.0
    known = {WHOLE_RUN_PARTS[phase]: h for phase, h in hours.items() if h is not None}
    total = sum(known.values()) + deploy_h
    parts = ", ".join(f"{name} {format_hours(h)}" for name, h in known.items())
    missing = [WHOLE_RUN_PARTS[phase] for phase, h in hours.items() if h is None]
    unknown = f"; {' and '.join(missing)} not planned (no rate measured)" if missing else ""
    deploy = (
        f"the deploy's restart of production {format_hours(deploy_h)}, a rollback another"
        if load
        else "the deploy's restart not planned (production's load time unknown)"
    )
    return total, f"Whole run: {format_hours(total)} ({parts}, each with the servers it loads; {deploy}{unknown})."


def production_load(ctx: RunContext, state: RunState, model_bytes: int | None) -> tuple[float, str]:
    """Seconds production takes to load, and where the figure comes from: the last restart this run measured,
    else target.load_time_s, else an estimate from the model's size."""
    production = run_facts(state).production
    measured = production.last_load_s() if production is not None else None
    if measured is not None:
        return measured, "measured when this run last restarted production"
    if ctx.config.target.load_time_s is not None:
        return ctx.config.target.load_time_s, "target.load_time_s in the config"
    if not model_bytes:  # None, or no weight file found: 0 bytes is no size to estimate from
        return default_load_s(0), "assumed: the weights' size is unknown"
    return default_load_s(model_bytes), f"estimated from the weights' {figure(model_bytes / 1e9)} GB"


def budget_inputs(
    ctx: RunContext,
    state: RunState,
    dims: ModelDims,
    hours: dict[str, float | None],
    mode: HiddenStatesMode | None = None,
    model_bytes: int | None = None,
) -> GpuBudgetInputs:
    """What the GPU budget weighs: the verified GPUs, production's layout from its unit (read on a GPU host only),
    the weights, and the phases' hours (production's load time is filled in by production_plan)."""
    gpus = [GpuFree.model_validate(gpu.model_dump()) for gpu in run_facts(state).gpus.gpus]
    tensor, pipeline, share = 1, 1, None
    if gpus:  # only a GPU host needs the layout and the weights' size; a CPU host is asked nothing more
        launch = inherit_launch(read_unit(production_checks(ctx)))
        flags = dict(launch.flags)
        tensor = int(flags.get("--tensor-parallel-size") or 1)
        pipeline = int(flags.get("--pipeline-parallel-size") or 1)
        share = _memory_share(flags.get("--gpu-memory-utilization"))
        model_bytes = model_bytes or _weights_on_disk(ctx)
    layout = ProductionLayout(
        tensor_parallel_size=tensor, pipeline_parallel_size=pipeline, load_s=1.0, gpu_memory_utilization=share
    )
    return GpuBudgetInputs(
        model=dims,
        model_bytes=model_bytes,
        gpus=gpus,
        production=layout,
        phase_hours=hours,
        draft_vocab_size=run_sizes(state).draft_vocab_size,
        online=mode is not None and mode.online,
        tokenize_only=mode is not None and mode.extracts_nothing,
    )


def online_refusal(ctx: RunContext, state: RunState, dims: ModelDims, model_bytes: int | None) -> str | None:
    """Why online and hybrid training cannot run on this host's GPUs at all (None: they can, or no GPU): checked
    before the mode is chosen, so the plan never chooses one that would fail inside production's downtime."""
    return online_unplaceable(
        budget_inputs(ctx, state, dims, {}, None, model_bytes).model_copy(update={"online": True})
    )


def production_plan(
    ctx: RunContext,
    state: RunState,
    dims: ModelDims,
    hours: dict[str, float | None],
    tok_s: float | None,
    mode: HiddenStatesMode | None = None,
    model_bytes: int | None = None,
) -> dict[str, Any]:
    """Each phase's production impact (plan["phases"][phase]["production"]), production's load time, the
    evaluation's hours (which depend on it), the extraction backend, and the hidden states' mode (`mode`, with the
    train phase's extraction server's --gpu-memory-utilization where the GPU budget lowers it; None: offline).
    `model_bytes`: the weights as the plan measured them where the model was found (else target.model_dir's)."""
    inputs = budget_inputs(ctx, state, dims, hours, mode, model_bytes)
    gpus = inputs.gpus
    model_bytes = inputs.model_bytes
    load_s, source = production_load(ctx, state, weights_bytes(inputs) if gpus else model_bytes)
    evaluate_h = evaluation_hours(state, load_s, tok_s)
    layout = inputs.production.model_copy(update={"load_s": load_s, "load_source": source})
    inputs = inputs.model_copy(update={"production": layout, "phase_hours": {**hours, "evaluate": evaluate_h}})
    requested = run_sizes(state).extraction_backend
    if mode is not None and mode.extracts_nothing:
        choice = BackendChoice(
            backend="hf", requested=requested,
            reason=f"hf: the hidden states are all fetched online ({mode.mode}), so extraction only tokenizes the "
            "samples, with no server and no model weights, whatever the backend",
        )  # fmt: skip
    else:
        offline = inputs.model_copy(update={"tokenize_only": False})
        choice = choose_backend(
            requested,
            inputs,
            phase_impact(offline, "extract"),
            vllm_extraction(state),
            ctx.host,
            ctx.config.target.model_dir,
        )
    # The servers the phases start load like production: extraction's (vllm backend), online training's.
    loads = server_loads(choice.backend == "vllm" and not (mode is not None and mode.extracts_nothing), mode, load_s)
    hours = {phase: None if h is None else h + loads.get(phase, 0.0) for phase, h in hours.items()}
    inputs = inputs.model_copy(update={"phase_hours": {**hours, "evaluate": evaluate_h}})
    impacts = one_window(budget(inputs), load_s)
    for phase, impact in impacts.items():
        ctx.on_note(f"plan {phase}: production {impact.action}: {impact.reason}")
    ctx.on_note(f"plan extract: backend {choice.reason}")
    if mode is not None and mode.online:
        lowered = online_train_fit(inputs).memory_utilization
        mode = mode.model_copy(update={"server_memory_utilization": lowered})
    return {
        "phases": {phase: impact.model_dump() for phase, impact in impacts.items()},
        "load": {"load_s": load_s, "source": source},
        "evaluate_hours": evaluate_h,
        "phase_hours": hours,
        "extraction": choice.model_dump(),
        "extraction_mode": mode,
    }


def server_loads(extraction_server: bool, mode: HiddenStatesMode | None, load_s: float) -> dict[str, float]:
    """Hours each phase spends loading a server of its own, as long as production takes: the extraction server
    (`extraction_server`: the vllm backend over stored samples) and online training's."""
    load_h = load_s / 3600
    return {
        "extract": load_h if extraction_server else 0.0,
        "train": load_h if mode is not None and mode.online else 0.0,
    }


def _memory_share(flag: str | None) -> float | None:
    """Production's --gpu-memory-utilization, where it sets one that reads as a share of a GPU."""
    try:
        share = float(flag) if flag is not None else None
    except ValueError:
        return None
    return share if share is not None and 0 < share <= 1 else None


def vllm_extraction(state: RunState) -> bool | None:
    """Whether verify's compat table says the vllm extraction path works here (None: not known)."""
    rows = [row for row in run_facts(state).compat.get("table", []) if (row["phase"], row["path"]) == VLLM_PATH]
    if any(row["works"] is False for row in rows):
        return False
    return True if rows and all(row["works"] is True for row in rows) else None


def checked_paths(state: RunState, production: dict[str, Any]) -> dict[str, Any]:
    """The plan's extraction backend and, per phase, whether its chosen path works here (plan["paths"]): an online
    or hybrid train phase needs vLLM's extract_hidden_states path too, for its extraction server."""
    extraction = production["extraction"]
    mode = production.get("extraction_mode")
    online = mode is not None and mode.online
    run = run_facts(state)
    paths = phase_paths(run.compat, run.server_flags, extraction["backend"], on_gpu(state), online)
    return {"extraction": extraction, "paths": {phase: path.model_dump() for phase, path in paths.items()}}


def _weights_on_disk(ctx: RunContext) -> int | None:
    """The served model's weight files in bytes (safetensors or bin), None when the directory cannot be read."""
    model_dir = ctx.config.target.model_dir
    return weights_on_disk(ctx.host, model_dir) if model_dir is not None else None
