"""The vLLM servers evaluate.py starts for itself: the target alone, the target with the drafter per k, and with
vLLM's n-gram speculation per k.

Where they start: on a GPU host each server takes production's GPUs, so they start in turn on --port. On a host
without CUDA they start side by side when the memory holds them all (the n-th on --port + n): a start is mostly
single-threaded imports (about 30 s of the embedded target's), so two cores start two at once, and an evaluation
of three servers waits for about one start instead of three. They are measured once every start has finished, so no
start takes cores from a measurement, and interleaved (eval_runs.py): each prompt goes to every server in turn.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import progress
from vllm_server import ServerFailed, VllmServer, merge_flags, server_argv, server_env, stop_all

GIB = 1024**3
# What a CPU server holds besides its KV cache and weights: torch and vLLM in the API server and the engine
# (measured on the embedded target: 3.95 GB resident with a 2 GiB cache and 0.54 GB of fp32 weights).
RUNTIME_BYTES = 3 * GIB // 2
KEEP_FREE_BYTES = GIB  # left to everything else on the host when servers start side by side
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


@dataclass(frozen=True)
class ServerSpec:
    name: str  # its log is LOGS/<name>.log, and its progress lines say it
    speculative: dict[str, Any] | None  # --speculative-config, None for the target alone


def cpu_server_args() -> list[str]:
    """What a vLLM without CUDA needs here, whatever the CPU. `--dtype float32`: in bf16, verifying a draft in one
    batch rounds differently from decoding token by token, so greedy outputs with and without the drafter
    differed; in fp32 they must be identical, and `outputs_identical` checks it. `--enforce-eager`: these servers
    live for a few hundred tokens, and torch.compile's minute of start-up per server costs more than it saves
    (decoding a small model one request at a time is bound by reading the weights, not by Python). None on a GPU
    host (the model's own dtype, and CUDA graphs)."""
    return [] if cuda_available() else ["--dtype", "float32", "--enforce-eager"]


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def weight_bytes(directory: Path | None) -> int:
    if directory is None or not directory.is_dir():
        return 0
    return sum(path.stat().st_size for path in directory.iterdir() if path.name.endswith(WEIGHT_SUFFIXES))


def server_bytes(model: Path, drafter: Path | None, env: dict[str, str]) -> int:
    """The memory one CPU server holds: its KV cache (VLLM_CPU_KVCACHE_SPACE GiB), the weights in fp32 (twice
    the bf16 files), and the runtime."""
    cache = int(env.get("VLLM_CPU_KVCACHE_SPACE") or 4) * GIB
    return cache + 2 * (weight_bytes(model) + weight_bytes(drafter)) + RUNTIME_BYTES


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemAvailable, or 0 where the kernel does not say (then the servers start in turn)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def fits_side_by_side(count: int, each_bytes: int, available: int) -> bool:
    """More than one server, and memory for all of them with KEEP_FREE_BYTES to spare."""
    return count > 1 and count * each_bytes + KEEP_FREE_BYTES <= available


def side_by_side(count: int, model: Path, drafter: Path | None, env: dict[str, str]) -> bool:
    """Whether `count` servers start at once here: no CUDA, and the memory for all of them."""
    if count < 2 or cuda_available():
        return False
    return fits_side_by_side(count, server_bytes(model, drafter, env), available_bytes())


def _server(args: argparse.Namespace, spec: ServerSpec, port: int, env: dict[str, str]) -> VllmServer:
    flags = ["--seed", "0"]
    if spec.speculative:
        flags += ["--speculative-config", json.dumps(spec.speculative)]
    flags += cpu_server_args()  # before --vllm-args, so a --dtype there wins
    flags += shlex.split(args.vllm_args)
    argv = server_argv(sys.executable, args.model, port, *merge_flags(args.inherit, *flags))
    log_path = (args.logs or args.out.parent) / f"{spec.name}.log"

    def waiting(waited_s: float) -> None:
        progress.emit(phase="server", server=spec.name, waiting_s=round(waited_s), timeout_s=args.start_timeout)

    return VllmServer(argv, env, log_path, ready_timeout_s=args.start_timeout, on_wait=waiting)


def _start(server: VllmServer, name: str) -> None:
    server.start()
    progress.emit(phase="server", server=name, pid=server.pid, command=server.argv, log=str(server.log_path))


class Servers:
    """What `served` yields: the servers, either all up side by side (`up`) or each started when its turn comes
    (`turns`)."""

    def __init__(self, specs: list[ServerSpec], servers: list[VllmServer], side_by_side: bool) -> None:
        self.specs, self.servers, self.side_by_side = specs, servers, side_by_side
        self._stopped: set[int] = set()

    def stop(self, index: int) -> None:
        if index not in self._stopped:
            self._stopped.add(index)
            self.servers[index].stop()

    def stop_all(self) -> None:
        """Every server not stopped yet, together (vllm_server.stop_all)."""
        left = [index for index in range(len(self.servers)) if index not in self._stopped]
        self._stopped.update(left)
        stop_all([self.servers[index] for index in left])

    def up(self) -> list[tuple[ServerSpec, str]]:
        """Side by side: every server, once every start has finished (so none takes cores from a measurement)."""
        for server in self.servers:
            server.wait_ready()
        return [(spec, server.base_url) for spec, server in zip(self.specs, self.servers, strict=True)]

    def turns(self) -> Iterator[tuple[ServerSpec, str]]:
        """In turn: each server started, yielded once it serves, and stopped before the next one starts."""
        for index, (spec, server) in enumerate(zip(self.specs, self.servers, strict=True)):
            _start(server, spec.name)
            server.wait_ready()
            yield spec, server.base_url
            self.stop(index)


@contextmanager
def served(args: argparse.Namespace, specs: list[ServerSpec]) -> Iterator[Servers]:
    """`with served(args, specs) as servers:` side by side (`servers.side_by_side`), measure on `servers.up()`;
    else `for spec, url in servers.turns():` one after the other. Every server is stopped when the block ends, however
    it ends. A server that fails to start ends the evaluation with its log's tail (SystemExit)."""
    env = server_env()
    together = side_by_side(len(specs), args.model, args.drafter, env)
    ports = [args.port + (index if together else 0) for index in range(len(specs))]
    servers = Servers(
        specs, [_server(args, spec, port, env) for spec, port in zip(specs, ports, strict=True)], together
    )
    try:
        if together:
            progress.emit(phase="servers", side_by_side=len(specs), ports=ports)
            for spec, server in zip(specs, servers.servers, strict=True):
                _start(server, spec.name)
        yield servers
    except ServerFailed as error:
        raise SystemExit(str(error)) from None
    finally:
        servers.stop_all()
