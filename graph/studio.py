"""The pipeline as LangGraph Studio / `langgraph dev` loads it (see langgraph.json).

Studio shows the state machine and its checkpoints. Running nodes needs the live RunContext (hosts, the
transcript, the policy), which only `eyas run` builds, so drive runs from the command line.
"""

from eyas.graph.pipeline import build_graph

graph = build_graph()
