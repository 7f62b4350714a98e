"""What `eyas demo` says last when production's counters roll its drafter back: the figures, why, and what would
keep one. A new user's only result must not read as "the product does not work" when it is the demo's size.

The figures quoted were measured on 2 CPU cores (2026-12-02; issue 29's learning curve, in
runs/examples/bench-drafter/README.md, and the ceiling test, tests/integration/test_drafter_e2e.py).
"""

from __future__ import annotations

from eyas.tools.service.deploy import DeployResult
from eyas.tools.settings.sizes import DEFAULT_SIZES, Sizes

# Acceptance length at k=3 against answer tokens trained on (ShareGPT, one TTT step, 3 epochs): about +0.06 for
# each doubling of the data, so a few hours of this CPU's generation would not reach a drafter that pays.
CURVE = "1.10 at 6K answer tokens, 1.16 at 11K, 1.22 at 24K, 1.28 at 49K"
# The ceiling: counting prompts, which the target continues without surprise, two minutes of training.
CEILING = "2.3-2.6 accepted tokens per step of 4, and 1.25-1.6x the target's tokens/s"


def rolled_back_lines(result: DeployResult, sizes: Sizes) -> list[str]:
    """The demo's closing lines after a rollback: what production measured, and what the sizes explain."""
    after, before = result.after, result.before
    measured = ""
    if after is not None and after.mean_acceptance_length is not None:
        measured = f" (acceptance length {after.mean_acceptance_length:.2f} at k={sizes.num_speculative_tokens}"
        if before is not None:
            measured += f"; {after.tokens_per_s:.1f} tokens/s with it, {before.tokens_per_s:.1f} without"
        measured += ")"
    return [
        f"Why it was rolled back{measured}: at the demo's sizes ({sizes.samples} samples of up to "
        f"{sizes.max_tokens} answer tokens, {sizes.epochs} epochs, {sizes.ttt_steps} TTT step) a drafter guesses "
        f"the target's next token about a fifth of the time. More data moves it slowly on this CPU: {CURVE}.",
        f"The recipe is not the limit: on answers the target continues without surprise the same pipeline reaches "
        f"{CEILING} on this CPU (tests/integration/test_drafter_e2e.py).",
        f"What keeps a drafter: a real target on a GPU host with the default sizes ({DEFAULT_SIZES.samples:,} "
        f"samples, {DEFAULT_SIZES.ttt_steps} TTT steps, a {DEFAULT_SIZES.draft_vocab_size:,}-token vocabulary); "
        "`eyas plan` there shows their hours and disk.",
    ]
