"""The plan made again once the data exists (graph/phases/plan/replan.py): the rehearsal host's first plan (every
answer at max_tokens: 4,096 tokens) against a generated file whose samples are far shorter; the extraction gate then
weighs the hours and bytes expected now, with those planned at the start beside them."""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.runtime import Runtime
from test_rehearsal_plan import rehearsal_host

from eyas.agents.faces.gate_text import gate_sections
from eyas.graph.gates.view import GateEstimate, gate_view
from eyas.graph.phases.plan.node import made_plan
from eyas.graph.phases.plan.replan import replan_node
from eyas.graph.state import run_plan, run_sizes
from eyas.tools.hosts.http import HttpClient
from eyas.tools.planning.figures import Figures, planned_sizes
from eyas.tools.planning.measure import measure_inputs
from eyas.tools.planning.prompt_count import count_prompts
from eyas.tools.settings.units import parse_size


def test_the_extraction_gate_weighs_the_plan_made_from_the_generated_data(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    figures = Figures(
        **planned_sizes(run_sizes(state)), hidden_size=7168, num_layers=61, vocab_size=163840,
        free_disk_bytes=state["free_disk_bytes"], generation_tok_s=1500.0, data_path=ctx.config.host().workdir,
    )  # fmt: skip
    measured = measure_inputs(figures, config=ctx.config, host=None, http=HttpClient())
    state["plan"] = made_plan(ctx, state, measured, count_prompts(None, figures)).model_dump(mode="json")
    state["measured"] = measured.model_dump(mode="json")
    first = run_plan(state)
    # What the data phase wrote: 1,000-token conversations of two answers, 400 tokens each.
    generated = Path(state["artifacts"]["conversations"])
    generated.parent.mkdir(parents=True)
    usage = {"sequence_tokens": 1000, "completion_tokens": 800, "requests": 2}
    generated.write_text("".join(json.dumps({"id": str(i), "usage": usage}) + "\n" for i in range(50)))

    state.update(replan_node(state, Runtime(context=ctx)))  # type: ignore[typeddict-item]
    again = run_plan(state)
    assert state["plan_at_start"] == first.model_dump(mode="json")
    assert again.sources["tokens"].startswith("averages of 50 samples of ") and again.fits is True
    assert again.needed_bytes is not None and first.needed_bytes is not None
    # 1,000 tokens a sample, not 4,096 and a prompt: all of them offline now, in half what hybrid needed.
    assert again.needed_bytes < first.needed_bytes / 1.5
    data_now, data_then = again.phase("data").phase_hours, first.phase("data").phase_hours
    assert data_now is not None and data_then is not None and data_now < data_then / 2
    assert again.extraction_mode is not None and again.extraction_mode.mode == "offline"  # now it fits the disk

    view = gate_view("extract", state, ctx, [])
    assert isinstance(view.estimate, GateEstimate)
    assert view.estimate.start_total_hours == first.total_hours and view.estimate.total_hours == again.total_hours
    labels = {line.label for section in gate_sections(view) for line in section.lines}
    assert {"whole run", "whole run, planned at the start", "this phase, planned at the start"} <= labels


def test_a_run_planned_before_the_plan_kept_its_inputs_is_left_as_planned(tmp_path: Path) -> None:
    ctx, state = rehearsal_host(tmp_path, parse_size("2.9TB"))
    assert "measured" not in state and replan_node(state, Runtime(context=ctx)) == {}
