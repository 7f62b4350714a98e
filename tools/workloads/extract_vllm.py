"""The vllm backend of extract.py: vLLM's `extract_hidden_states` method with the hidden-states connector.

The same setup speculators drives (its launch_vllm.py and generate-offline-data): a vLLM server started
with `--speculative-config {"method": "extract_hidden_states", "num_speculative_tokens": 1,
"draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [...]}}}` and
`--kv-transfer-config` naming the connector and its `shared_storage_path`. Each sample is one
Completions request with the prompt as token ids and max_tokens=1; the response carries
`kv_transfer_params.hidden_states_path`, a file the connector writes asynchronously under an exclusive
flock on `<path>.lock`. The file is read once that lock is free, checked, and rewritten with the loss
mask into the output directory (staged files live in a sibling directory on the same filesystem).

On a CPU-only vLLM the stock connector crashes, so `cpu_hidden_states_connector` (a sibling module, on
the server's PYTHONPATH) is loaded through `kv_connector_module_path` instead; there the model runs in
float32 when the CPU lacks native bf16 (cpu_caps), and the states are cast to --dtype as they are stored.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file

import progress
import vllm_server
from cpu_caps import vllm_cpu_dtype_args
from extract_plan import Sample, UsageError, check_layer_count
from extract_server import ContextTooShort, extraction_argv
from http_fetch import fetch
from target_model import REMOTE_CODE_FLAG

WORKLOADS_DIR = Path(__file__).resolve().parent
LOCK_TIMEOUT_S = 120.0
DYING_S = 10.0  # how long a server that refuses connections is given to exit before it is taken as alive


def server_argv(
    python: str,
    model_dir: Path,
    layer_ids: list[int],
    staging: Path,
    port: int,
    max_model_len: int,
    connector: str,
    inherited: list[list[str | None]] | None = None,
    served_name: str | None = None,
) -> list[str]:
    """extract_server.extraction_argv with this CPU's needs: float32 where it would emulate bf16 (the files keep
    --dtype)."""
    cpu_flags = tuple(vllm_cpu_dtype_args()) if connector == "cpu" else ()
    try:
        return extraction_argv(
            python, model_dir, layer_ids, staging, port, max_model_len, connector, inherited, cpu_flags, served_name
        )
    except ContextTooShort as error:
        raise UsageError(str(error)) from None


def server_env() -> dict[str, str]:
    """The server's environment, with this directory on its path for the CPU connector module."""
    env = vllm_server.server_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(WORKLOADS_DIR), env.get("PYTHONPATH")]))
    return env


def open_server(
    args: Any,
    model: Path,
    layer_ids: list[int],
    max_len: int,
    staging: Path,
    log_path: Path,
    dtype: torch.dtype,
    served_name: str | None = None,
) -> VllmBackend:
    """The extraction server for samples of up to `max_len` tokens, from the flags extract.py and train.py --online
    share (--port, --connector, --inherit, --trust-remote-code, --concurrency, --request-timeout, --ready-timeout),
    staging its files in `staging` (emptied first), served as `served_name` where given (extraction_argv)."""
    connector = resolved_connector(args.connector)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    port = args.port or vllm_server.free_port()
    argv = server_argv(
        sys.executable, model, layer_ids, staging, port, max_len + 1, connector, args.inherit, served_name
    )
    if args.trust_remote_code:
        argv.append(REMOTE_CODE_FLAG)
    return VllmBackend(
        argv, server_env(), staging, log_path, concurrency=args.concurrency, request_timeout=args.request_timeout,
        ready_timeout=args.ready_timeout, dtype=dtype, layer_ids=layer_ids,
    )  # fmt: skip


def resolved_connector(requested: str) -> str:
    """--connector auto: the stock connector where CUDA runs the model, the CPU one elsewhere."""
    return requested if requested != "auto" else ("stock" if torch.cuda.is_available() else "cpu")


# vLLM's --dtype names -> the dtype its hidden-state files hold.
DTYPE_NAMES = {
    "float32": "float32", "float": "float32", "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
}  # fmt: skip


def server_dtype(argv: list[str], model_dir: Path) -> str:
    """What a server started with `argv` writes: its --dtype (production's, inherited, or this CPU's float32), else
    the model's own (config.json's torch_dtype or dtype; bfloat16 where it names none)."""
    given = None
    for index, word in enumerate(argv):
        if word == "--dtype" and index + 1 < len(argv):
            given = argv[index + 1]
        elif word.startswith("--dtype="):
            given = word.partition("=")[2]
    if given in DTYPE_NAMES:
        return DTYPE_NAMES[given]
    config = json.loads((model_dir / "config.json").read_text())
    own = config.get("torch_dtype") or config.get("dtype") or config.get("text_config", {}).get("torch_dtype")
    return DTYPE_NAMES.get(str(own), "bfloat16")


class VllmBackend:
    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        staging: Path,
        log_path: Path,
        *,
        concurrency: int,
        request_timeout: float,
        ready_timeout: float,
        dtype: torch.dtype,
        layer_ids: list[int],
    ):
        self.staging = staging
        self.layer_ids = layer_ids
        self.concurrency = concurrency
        self.request_timeout = request_timeout
        self.dtype = dtype
        self._restart = threading.Lock()
        self.server = vllm_server.VllmServer(argv, env, log_path, ready_timeout_s=ready_timeout, on_wait=_waiting)
        try:
            self.server.start()
            self.server.wait_ready()
            # Production's --served-model-name, when inherited, names the model in every request.
            self.served_name = self.server.served_model()
        except BaseException:
            self.close()
            raise

    def extract(
        self, samples: list[Sample], make_room: Callable[[list[Sample], int], None]
    ) -> Iterator[tuple[Sample, torch.Tensor]]:
        queue = list(reversed(samples))
        running: dict[Future[torch.Tensor], Sample] = {}
        with ThreadPoolExecutor(self.concurrency) as pool:
            while queue or running:
                while queue and len(running) < self.concurrency:
                    # Staged by vLLM, then rewritten: each file is on disk twice for a moment.
                    make_room([*running.values(), queue[-1]], 2)
                    sample = queue.pop()
                    running[pool.submit(self._one, sample)] = sample
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield running.pop(future), future.result()

    def fetch_file(self, sample: Sample) -> Path:
        """Ask the server for one sample's hidden states: the file it wrote, checked against the sample's token
        ids and layers (a mismatch is refused, never used); the caller owns the file from here."""
        token_ids = sample.token_ids.tolist()
        body = {"model": self.served_name, "prompt": token_ids, "max_tokens": 1, "return_token_ids": True}
        reply = json.loads(fetch(f"{self.server.base_url}/v1/completions", body, deadline_s=self.request_timeout))
        if reply["choices"][0].get("prompt_token_ids") != token_ids:
            raise RuntimeError(f"vLLM tokenized sample {sample.sample_id} differently from the prompt it was sent")
        staged = Path(reply["kv_transfer_params"]["hidden_states_path"])
        _wait_unlocked(Path(f"{staged}.lock"))
        with safe_open(str(staged), framework="pt") as handle:
            stored = handle.get_tensor("token_ids")
            layers = int(handle.get_slice("hidden_states").get_shape()[1])
        if not torch.equal(stored, sample.token_ids):
            staged.unlink()
            raise RuntimeError(
                f"the hidden states vLLM wrote for sample {sample.sample_id} are for other tokens "
                f"({token_difference(stored, sample.token_ids)}); refused and deleted"
            )
        try:
            check_layer_count(layers, self.layer_ids, sample.sample_id)
        except UsageError:
            staged.unlink()
            raise
        return staged

    def _one(self, sample: Sample) -> torch.Tensor:
        staged = self.fetch_file(sample)
        tensors = load_file(staged)
        staged.unlink()
        return tensors["hidden_states"].to(self.dtype)

    def revive(self) -> bool:
        """Start the server again if it has died (a kill, an out-of-memory); True when it was restarted. Callers on
        several threads may ask at once: the first restarts it, the others find it running."""
        with self._restart:
            process = self.server.process
            if process is not None and process.poll() is None:
                try:
                    # A killed server stops answering a moment before it exits (its threads and gigabytes are torn
                    # down first): every try would fail in that moment and find it alive. Give it time to go.
                    process.wait(timeout=DYING_S)
                except subprocess.TimeoutExpired:
                    return False  # alive: the request failed, not the server
            progress.emit(phase="server", restarted=True, exit_code=process.returncode if process else None)
            self.server.stop()
            shutil.rmtree(self.staging, ignore_errors=True)  # what the dead server was writing
            self.staging.mkdir(parents=True, exist_ok=True)
            self.server.start()
            self.server.wait_ready()
            progress.emit(phase="server", ready=True, server_pid=self.server.pid)
            return True

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.staging, ignore_errors=True)


def token_difference(stored: torch.Tensor, expected: torch.Tensor) -> str:
    """Where a file's token ids part from the sample's, in words: enough to tell a shifted or truncated prompt from
    another sample's file."""
    if stored.shape != expected.shape:
        return f"{stored.numel()} tokens in the file, {expected.numel()} in the sample"
    position = int((stored != expected).nonzero()[0, 0])
    return f"token {position} is {int(stored[position])} in the file, {int(expected[position])} in the sample"


def _waiting(waited_s: float) -> None:
    progress.emit(phase="server", waiting_s=round(waited_s))


def _wait_unlocked(lock: Path) -> None:
    """Wait until the connector's writer releases its exclusive flock, then remove the lock file."""
    if not lock.exists():
        return
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    fd = os.open(lock, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    written = lock.with_suffix("")
                    raise TimeoutError(f"vLLM did not finish writing {written} within {LOCK_TIMEOUT_S} s") from None
                time.sleep(0.01)
    finally:
        os.close(fd)
    lock.unlink(missing_ok=True)
