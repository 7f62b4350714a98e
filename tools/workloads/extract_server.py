"""The vLLM command line of extract.py's vllm backend: production's flags plus the hidden-states method.

Plain Python, so that eyas shows the exact server a run would start (gates, `eyas run --dry-run`) from the
same function the workload starts it with.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

try:
    import vllm_server  # as a workload, beside its sibling modules
except ImportError:  # imported by eyas itself
    from eyas.tools.workloads import vllm_server

SERVED_NAME = "eyas-extract"
CONNECTORS = {
    "stock": {"kv_connector": "ExampleHiddenStatesConnector"},
    "cpu": {"kv_connector": "CpuHiddenStatesConnector", "kv_connector_module_path": "cpu_hidden_states_connector"},
}


class ContextTooShort(ValueError):
    """Production's --max-model-len cannot hold the longest sample."""


def extraction_argv(
    python: str,
    model_dir: Path | str,
    layer_ids: list[int],
    staging: Path | str,
    port: int,
    max_model_len: int,
    connector: str,
    inherited: list[list[str | None]] | None = None,
    cpu_flags: tuple[str, ...] = (),
    served_name: str | None = None,
) -> list[str]:
    """The extraction server: production's flags (`inherited`) with the hidden-states method and connector.
    Production's served name and context length are kept when it sets them; the context must hold the samples.
    `cpu_flags` are what a CPU-only vLLM needs on top (the caller knows its CPU). `served_name` replaces the name
    for a client that insists on one: speculators' online dataset (CUDA training) refuses a server whose first model
    is not named as its --verifier-name-or-path (speculators/train/data.py, ArrowDataset._setup_client)."""
    inherited = inherited or []
    production_len = vllm_server.inherited_value(inherited, "--max-model-len")
    if production_len is not None and production_len.isdigit() and int(production_len) < max_model_len:
        raise ContextTooShort(
            f"--max-tokens {max_model_len - 1} does not fit production's --max-model-len {production_len}: pass "
            f"--max-tokens {int(production_len) - 1} or less"
        )
    speculative = {
        "method": "extract_hidden_states",
        "num_speculative_tokens": 1,
        "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": layer_ids}},
    }
    transfer = {
        **CONNECTORS[connector],
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": str(staging)},
    }
    own = ["--speculative-config", json.dumps(speculative), "--kv-transfer-config", json.dumps(transfer)]
    if served_name is not None:
        own += ["--served-model-name", served_name]
    elif vllm_server.inherited_value(inherited, "--served-model-name") is None:
        own += ["--served-model-name", SERVED_NAME]
    if production_len is None:
        own += ["--max-model-len", str(max_model_len)]
    if connector == "cpu":
        own.append("--enforce-eager")  # a CPU compile costs minutes at startup and gains little for prefill
    own += cpu_flags
    return vllm_server.server_argv(python, Path(model_dir), port, *vllm_server.merge_flags(inherited, *own))


def add_server_flags(parser: argparse.ArgumentParser) -> None:
    """The extraction server's flags, the same in extract.py (its vllm backend) and train.py (--online)."""
    parser.add_argument("--port", type=int, default=0, help="vllm server port on 127.0.0.1; 0 picks one")
    parser.add_argument("--concurrency", type=int, default=4, help="vllm server: requests in flight; default 4")
    parser.add_argument(
        "--connector", choices=["auto", "stock", "cpu"], default="auto", help="vllm server: cpu without CUDA"
    )
    parser.add_argument("--request-timeout", type=float, default=600.0, help="vllm server: seconds per request")
    parser.add_argument("--ready-timeout", type=float, default=900.0, help="vllm server: seconds to start")
    parser.add_argument(
        "--inherit",
        type=json.loads,
        default=[],
        help="vllm server: production's launch flags as JSON [[flag, value or null], ...]; the server starts with "
        "them, minus the flags it sets itself (eyas builds it from the production unit)",
    )
