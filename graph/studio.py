"""The pipeline as LangGraph Studio / `langgraph dev` loads it (langgraph.json).

Studio shows the state machine, its input schema (RunState) and the runs' state. It cannot drive a run:
every node acts on a live run context (the host's connection, the run's transcript, its policy), which only
`eyas run` builds, so a node started from Studio stops at once with a message that says so and what to run
instead. The context Studio offers is `StudioContext`, which it can build and show as a form.
"""

from __future__ import annotations

from typing_extensions import TypedDict

from eyas.graph.pipeline import build_graph


class StudioContext(TypedDict, total=False):
    """Studio's per-run settings. eyas reads its config from --config, $EYAS_CONFIG or ./eyas.toml."""

    config: str  # the eyas TOML to pass to `eyas run --config`, for the operator's reference


graph = build_graph(context_schema=StudioContext)
