"""The plan's rates where nothing measured them on the server: decoding assumed from the weights and production's GPUs
(production down), extraction's prefill from the probe's wave of long prompts or assumed compute-bound; each with its
source in words, as the plan's sources show it."""

from __future__ import annotations

from eyas.tools.hosts.host import Host
from eyas.tools.planning.estimate import (
    GPU_DECODE_BYTES_PER_S,
    GPU_TRAINING_FLOPS,
    assumed_decode_tok_s,
    assumed_prefill_tok_s,
)
from eyas.tools.planning.figures import Figures
from eyas.tools.planning.model_config import MeasureError
from eyas.tools.planning.model_dims import ModelDims
from eyas.tools.planning.throughput_probe import Throughput


def assumed_decoding(
    dims: ModelDims, weight_bytes: int | None, gpus: int, figures: Figures, sequence: float, host: Host, why: str
) -> tuple[float, float, str]:
    """Decoding tokens/s at the run's concurrency and for one request alone, assumed from the weights' bytes and
    production's GPUs (estimate.assumed_decode_tok_s), with the assumption in words; MeasureError when there is
    nothing to assume it from."""
    if not gpus or not weight_bytes:
        missing = f"no GPU on {host.name}" if not gpus else "the weights' size is unknown (target.model_dir)"
        raise MeasureError(
            f"The server could not be asked ({why}) and the decoding rate cannot be assumed ({missing}): start the "
            "server, or give the figure with --throughput TOKENS_PER_S."
        )
    prefill = assumed_prefill_tok_s(dims, gpus * GPU_TRAINING_FLOPS, sequence)
    tok_s = assumed_decode_tok_s(weight_bytes, gpus, figures.concurrency, prefill)
    single = assumed_decode_tok_s(weight_bytes, gpus, 1, prefill)
    capped = " (capped at the prefill rate: a batch that large is compute-bound)" if tok_s == prefill else ""
    source = (
        f"assumed, not measured (the server could not be asked: {why}): {tok_s:,.0f} tokens/s{capped}, "
        f"{figures.concurrency} requests at once, each decoding step reading the {weight_bytes / 1e9:,.0f} GB of "
        f"weights once from production's {gpus} GPU(s) at {GPU_DECODE_BYTES_PER_S / 1e12:g} TB/s each"
    )
    return tok_s, single, source


def extraction_rate(
    figures: Figures,
    throughput: Throughput | None,
    dims: ModelDims,
    flops: tuple[float, str],
    tokens: float,
    decode_tok_s: float,
) -> tuple[float, str]:
    """Extraction's tokens/s (one forward pass over each sample: prefill) and its source: given, else the server's
    prefill the probe measured, else assumed compute-bound from `flops` (never below decoding)."""
    if figures.prefill_tok_s is not None:
        return figures.prefill_tok_s, "given"
    if throughput is not None and throughput.prefill_tok_s:
        requests = throughput.prefill_requests
        return throughput.prefill_tok_s, (
            f"prefill probe: {requests} prompts of {throughput.prefill_tokens / requests:,.0f} tokens at once, each "
            "answered with one token (extraction is one forward pass per sample)"
        )
    rate = assumed_prefill_tok_s(dims, flops[0], tokens)
    floor = f"; below the decoding rate, so taken as that, {decode_tok_s:,.0f}" if rate < decode_tok_s else ""
    return max(rate, decode_tok_s), (
        f"assumed, not measured: prefill at {rate:,.0f} tokens/s{floor} ({flops[0]:.1e} FLOP/s sustained, "
        f"{flops[1]}, over {dims.forward_flops(tokens) / 1e9:,.1f} GFLOP a token: 2 per active parameter, "
        f"{dims.active_parameters() / 1e9:,.1f} B, and the attention over {tokens:,.0f}-token samples)"
    )
