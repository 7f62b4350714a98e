"""The shapes of real targets the planning tests plan for (what /v1/models and config.json would say)."""

from __future__ import annotations

from eyas.tools.planning.estimate import ModelDims

# The embedded target, SmolLM2-135M-Instruct.
SMOLLM2 = ModelDims(hidden_size=576, num_layers=30, vocab_size=49152, intermediate_size=1536)
