"""What a plan is made from as the operator gives it: the run's sizes that shape a plan and the host's figures, each
within bounds, where None means: measure it on the host (tools/planning/measure.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, FiniteFloat

from eyas.tools.settings.sizes import (
    DEFAULT_SIZES,
    SIZE_LIMITS,
    Sizes,
    prompt_chars,
)
from eyas.tools.settings.units import MAX_BYTES

# Bounds of the model's shape as a flag gives it: far above any model (Llama 3.1 405B: hidden 16,384, 126 layers;
# Gemma's 262,144-token vocabulary), so a typo of a few digits is caught before the plan prints exabytes.
MODEL_LIMITS = {"hidden_size": 1_048_576, "num_layers": 10_000, "vocab_size": 16_777_216}


# The run's sizes a plan is made for (the rest of Sizes changes neither its hours, its bytes nor its prompt supply).
PLANNED_SIZES = (
    "samples", "max_tokens", "max_seq_len", "epochs", "ttt_steps", "draft_vocab_size", "prompt_source", "held_out",
    "concurrency", "online_window",
)  # fmt: skip


def planned_sizes(sizes: Sizes) -> dict[str, Any]:
    """The Figures fields that come from the run's sizes."""
    return {name: getattr(sizes, name) for name in PLANNED_SIZES}


class Figures(BaseModel):
    """What the operator gave: the run's sizes (within SIZE_LIMITS, as `Sizes` checks them), and figures of the
    host where None means: measure it. Every bound is checked here, so no flag reaches the plan as 0, nan or inf
    (a float figure is a FiniteFloat: flags, TOML and JSON can all spell inf and nan)."""

    samples: int = Field(gt=0, le=SIZE_LIMITS["samples"])
    max_tokens: int = Field(gt=0, le=SIZE_LIMITS["max_tokens"])
    hidden_size: int | None = Field(None, gt=0, le=MODEL_LIMITS["hidden_size"])
    num_layers: int | None = Field(None, gt=3, le=MODEL_LIMITS["num_layers"])
    vocab_size: int | None = Field(None, gt=0, le=MODEL_LIMITS["vocab_size"])
    free_disk_bytes: int | None = Field(None, ge=0, le=MAX_BYTES)
    generation_tok_s: FiniteFloat | None = Field(None, gt=0)
    prefill_tok_s: FiniteFloat | None = Field(None, gt=0, description="extraction's prefill rate; None: measured")
    prompt_tokens: FiniteFloat | None = Field(None, ge=0, le=SIZE_LIMITS["max_seq_len"])
    generated_file: str | None = None  # a generate.py output on the host: its averages replace max_tokens
    data_path: str | None = None
    max_seq_len: int = Field(DEFAULT_SIZES.max_seq_len, gt=0, le=SIZE_LIMITS["max_seq_len"])
    epochs: int = Field(DEFAULT_SIZES.epochs, gt=0, le=SIZE_LIMITS["epochs"])
    ttt_steps: int = Field(DEFAULT_SIZES.ttt_steps, gt=0, le=SIZE_LIMITS["ttt_steps"])
    draft_vocab_size: int = Field(DEFAULT_SIZES.draft_vocab_size, gt=0, le=SIZE_LIMITS["draft_vocab_size"])
    probe_speeds: bool = Field(True, description="on a host without GPUs, measure extraction and training speed")
    prompt_source: str = Field(
        DEFAULT_SIZES.prompt_source, description="the run's prompts, whose length is measured and which are counted"
    )
    held_out: int = Field(DEFAULT_SIZES.held_out, gt=0, le=SIZE_LIMITS["held_out"])
    concurrency: int = Field(
        DEFAULT_SIZES.concurrency, gt=0, le=SIZE_LIMITS["concurrency"], description="generation requests in flight"
    )
    online_window: int = Field(DEFAULT_SIZES.online_window, gt=0, le=SIZE_LIMITS["online_window"])
    trust_remote_code: bool | None = Field(
        None, description="the run's choice, as verify made it; None: made here the same way (config, else the unit)"
    )

    @property
    def max_prompt_chars(self) -> int:
        """The longest prompt the data phase keeps at these sizes (Sizes.max_prompt_chars)."""
        return prompt_chars(self.max_seq_len, self.max_tokens)

    @property
    def complete(self) -> bool:
        """True when nothing needs the host."""
        dims = (self.hidden_size, self.num_layers, self.vocab_size, self.free_disk_bytes, self.generation_tok_s)
        return None not in dims
