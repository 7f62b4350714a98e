"""The vLLM servers a run starts itself (the vllm extraction backend, the online extraction server beside the
trainer, the evaluation's baseline and drafter servers), each built from production's launch
(tools/launch/inherited.py): the phases pass it to their jobs, and the gates and `eyas run --dry-run` show each
server's argv and what was inherited, overridden and dropped."""

from __future__ import annotations

import posixpath
from typing import Any

from eyas.graph.context import RunContext
from eyas.graph.phases.evaluate.jobs import EvaluateRequest, evaluate_sizes, server_argvs
from eyas.graph.run_facts import run_facts
from eyas.graph.state import RunState, run_plan, run_sizes
from eyas.tools.checks.result import CheckContext, config_checks
from eyas.tools.checks.server_flags import EVALUATE_OWN, EXTRACT_OWN
from eyas.tools.checks.service import read_unit
from eyas.tools.launch.inherited import InheritedLaunch, inherit_launch, ready_timeout_s
from eyas.tools.planning.hidden_states_mode import HiddenStatesMode
from eyas.tools.workloads.extract_server import extraction_argv

EXTRACT_PORT = 0  # extract.py picks a free port (train.py --online too)
ONLINE_STAGING = "online-staging"  # train.py --online stages the server's files in WORK/online-staging
MEMORY_FLAG = "--gpu-memory-utilization"


def on_gpu(state: RunState) -> bool:
    """Whether verify found GPUs: there extraction goes through vLLM (production's layout), on CPU through HF."""
    return bool(run_facts(state).gpus.count)


def extraction_backend(state: RunState) -> str:
    """The backend the plan chose (plan["extraction"]); for a plan made before it chose one, vllm on a GPU host."""
    chosen = run_plan(state).extraction
    return chosen.backend if chosen is not None else ("vllm" if on_gpu(state) else "hf")


def hidden_states_mode(state: RunState) -> HiddenStatesMode | None:
    """Where the plan has training's hidden states come from (plan["extraction_mode"]); None for a plan made
    before it chose (offline)."""
    return run_plan(state).extraction_mode


def online_training(state: RunState) -> bool:
    """Whether the train phase fetches hidden states online, from an extraction server it starts."""
    mode = hidden_states_mode(state)
    return mode is not None and mode.online


def offline_samples(state: RunState) -> int | None:
    """extract.py --offline-samples: None offline (every sample), K hybrid, 0 online."""
    mode = hidden_states_mode(state)
    return None if mode is None or mode.mode == "offline" else mode.offline_samples


def production_checks(ctx: RunContext) -> CheckContext:
    """The run's host and target as the checks see them, to read production's unit and key."""
    return config_checks(ctx.config, ctx.host, ctx.http)


def production_launch(ctx: RunContext, own: tuple[str, ...]) -> InheritedLaunch:
    """Production's launch, read from its unit (systemd, else target.unit_file) as the service check reads it."""
    target = ctx.config.target
    source = f"systemd unit {target.unit}" if target.unit else f"unit file {target.unit_file or '(none configured)'}"
    return inherit_launch(read_unit(production_checks(ctx)), own, source=source)


def ready_timeout(state: RunState) -> float | None:
    """A server's start deadline: production's load time as the plan has it, with a margin (None: no plan)."""
    load = run_plan(state).production_load
    return ready_timeout_s(load.load_s) if load is not None and load.load_s else None


def evaluation_launch(ctx: RunContext, state: RunState) -> InheritedLaunch:
    """Production's launch as the evaluation's servers take it: on a CPU host evaluate.py sets --dtype too."""
    return production_launch(ctx, EVALUATE_OWN if on_gpu(state) else (*EVALUATE_OWN, "--dtype"))


def evaluation_request(ctx: RunContext, state: RunState, launch: InheritedLaunch) -> EvaluateRequest:
    """The evaluate job's request: built here, for the phase to launch and for the gates and the dry run to show
    its servers (evaluation_servers), so that what is shown is what runs."""
    return EvaluateRequest(
        model_dir=ctx.model_dir,
        drafter_dir=ctx.artifact("drafter"),
        prompts=ctx.artifact("held_out"),
        out=ctx.artifact("evaluation"),
        **evaluate_sizes(run_sizes(state)),
        launch=launch,
        start_timeout_s=ready_timeout(state),
    )


def evaluation_servers(ctx: RunContext, state: RunState, launch: InheritedLaunch) -> dict[str, list[str]]:
    """The argv of each server the evaluate job starts on a GPU host (on a CPU, evaluate.py adds --dtype float32
    --enforce-eager), from the job's own request."""
    return server_argvs(ctx.host_config.python, evaluation_request(ctx, state, launch))


def extraction_server(ctx: RunContext, state: RunState, launch: InheritedLaunch) -> list[str]:
    """The argv of the vllm backend's server (extract.py picks a free port; the layers are the plan's)."""
    out = ctx.artifact("hidden_states")
    staging = f"{posixpath.dirname(out)}/.{posixpath.basename(out)}.vllm-staging"  # as extract.py names it
    return _hidden_states_server(ctx, state, launch, staging)


def _hidden_states_server(
    ctx: RunContext, state: RunState, launch: InheritedLaunch, staging: str, served_name: str | None = None
) -> list[str]:
    """An extraction server's argv with the plan's layers, staging its files in `staging`; a launch that cannot
    hold the run's sequences is shown as the reason instead."""
    connector = "stock" if on_gpu(state) else "cpu"
    inherited: list[list[str | None]] = [list(pair) for pair in launch.flags]
    try:
        return extraction_argv(
            ctx.host_config.python, ctx.model_dir, run_plan(state).captured_layers, staging, EXTRACT_PORT,
            run_sizes(state).max_seq_len + 1, connector, inherited, served_name=served_name,
        )  # fmt: skip
    except ValueError as error:
        return [f"(cannot start: {error})"]


def online_launch(ctx: RunContext, state: RunState) -> InheritedLaunch:
    """Production's launch as train.py --online's extraction server takes it: as the vllm backend's, with the
    --gpu-memory-utilization the plan lowered so that the trainer fits beside it (tools/planning/gpu_budget.py)."""
    launch = production_launch(ctx, EXTRACT_OWN)
    mode = hidden_states_mode(state)
    share = mode.server_memory_utilization if mode is not None else None
    if share is None:
        return launch
    before = dict(launch.flags).get(MEMORY_FLAG)
    value = f"{share:.2f}"
    why = f"{MEMORY_FLAG} {value} (production: {before or 'vLLM default'}; lowered so the trainer fits beside it)"
    return launch.model_copy(
        update={
            "flags": [(name, flag) for name, flag in launch.flags if name != MEMORY_FLAG] + [(MEMORY_FLAG, value)],
            "inherited": [name for name in launch.inherited if name != MEMORY_FLAG],
            "overridden": [*launch.overridden, why],
        }
    )


def online_server(ctx: RunContext, state: RunState, launch: InheritedLaunch) -> list[str]:
    """The argv of the extraction server train.py --online starts beside the trainer (a free port; the plan's
    layers, which the token files record; its staging in the training's work directory). On a GPU host speculators'
    dataset asks it for the samples, and it serves as the model directory, the name that dataset checks for."""
    served = ctx.model_dir if on_gpu(state) else None
    return _hidden_states_server(ctx, state, launch, f"{ctx.artifact('checkpoints')}/{ONLINE_STAGING}", served)


def launch_view(launch: InheritedLaunch, servers: dict[str, list[str]]) -> dict[str, Any]:
    """What a gate shows about the servers a phase starts."""
    return {**launch.summary(), "servers": servers}
