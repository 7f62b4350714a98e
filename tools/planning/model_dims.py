"""The target model's shape as the planner weighs it: what a token's forward pass costs, and which layers EAGLE-3
captures."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ModelDims(BaseModel):
    """The target model's shape, from its config.json."""

    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=3)
    vocab_size: int = Field(gt=0)
    intermediate_size: int | None = Field(None, gt=0, description="MLP width; default 4 x hidden")
    active_intermediate_size: int | None = Field(
        None, gt=0, description="MLP width a token passes through (a MoE's routed and shared experts); default the MLP"
    )
    default_max_model_len: int | None = Field(
        None, gt=0, description="the context vLLM serves the model at without --max-model-len (from config.json)"
    )

    def default_layers(self) -> list[int]:
        """EAGLE-3's auxiliary layers plus the last one, as speculators and vLLM capture them."""
        n = self.num_layers
        return [2, n // 2, n - 3, n]

    def active_parameters(self) -> int:
        """The parameters one token's forward pass multiplies by: per layer attention (4 h^2) and the MLP's three
        matrices at the active width, then the lm_head (what a MoE's inactive experts hold is not counted)."""
        h = self.hidden_size
        width = self.active_intermediate_size or self.intermediate_size or 4 * h
        return self.num_layers * (4 * h * h + 3 * h * width) + self.vocab_size * h

    def forward_flops(self, sequence_tokens: float) -> float:
        """FLOPs per token of a forward pass over samples of `sequence_tokens`: 2 per active parameter, and the
        attention over the context before it (QK and AV, 4 h FLOPs per earlier token and layer; half the sample
        on average)."""
        return 2 * self.active_parameters() + 2 * self.num_layers * self.hidden_size * sequence_tokens
