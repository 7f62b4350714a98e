"""The `--speculative-config` of each method eyas measures and deploys, the one source for evaluate.py's servers
(on the host, imported by its bare name) and for eyas's deploy and gates (imported as eyas.tools.workloads): the
server that was measured and the server production runs are then started with the same config. Plain Python."""

from __future__ import annotations

from typing import Any

DRAFTER_METHOD = "eagle3"
NGRAM_METHOD = "ngram"
# Prompt lookup: the last 2 to 4 tokens looked up in the context, the k tokens after the match copied as the draft.
NGRAM_LOOKUP = {"prompt_lookup_max": 4, "prompt_lookup_min": 2}


def drafter_config(drafter_dir: str, k: int) -> dict[str, Any]:
    """A trained EAGLE-3 drafter drafting k tokens a step."""
    return {"method": DRAFTER_METHOD, "model": drafter_dir, "num_speculative_tokens": k}


def ngram_config(k: int) -> dict[str, Any]:
    """vLLM's n-gram speculation: no drafter, k tokens copied from the context where it repeats."""
    return {"method": NGRAM_METHOD, "num_speculative_tokens": k, **NGRAM_LOOKUP}
