"""The graph as LangGraph Studio loads it: schemas it can render, and a node run from it refuses in words.

The Studio server itself (langgraph-cli's `langgraph dev`) is not installed in the test venv; the schemas are
what it asks the graph for, through the same calls."""

from __future__ import annotations

import pytest

from eyas.graph.pipeline import NoRunContext
from eyas.graph.studio import graph


def test_studio_gets_the_input_and_context_schemas() -> None:
    inputs = graph.get_input_jsonschema()
    assert {"run_id", "sizes", "artifacts", "decisions"} <= set(inputs["properties"])
    context = graph.get_context_jsonschema()
    assert context is not None and set(context["properties"]) == {"config"}


def test_a_node_run_from_studio_says_why_it_cannot_run() -> None:
    with pytest.raises(NoRunContext, match=r"node research cannot run here.*eyas run"):
        graph.invoke({"run_id": "studio"}, context={"config": "eyas.toml"})
