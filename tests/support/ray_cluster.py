"""A real two-node Ray cluster on this machine for the tests: a head and a worker node, each its own `ray start
--block` process on 127.0.0.1 (not Ray's in-process cluster utility, so the nodes are what a user starts).

The worker node carries the label role=worker and the resource eyas_worker, so a job can be placed on it. Ports
are free ones chosen at start (the job server, GCS, both dashboard agents, the client server), the temp dir is
private and short (Ray's unix sockets live below it), and the object store is small. `stop` ends every process
the nodes started, by pid: the nodes' process groups, and the processes Ray starts in groups of their own (its
workers, the jobs' entrypoints).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from waiting import process_gone, wait_for

RAY = Path(sys.executable).with_name("ray")
OBJECT_STORE_BYTES = 80 * 1024 * 1024
WORKER_LABEL = {"role": "worker"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class RayCluster:
    def __init__(self) -> None:
        self.temp_dir = tempfile.mkdtemp(prefix="eyr", dir="/tmp")
        self.gcs_port = free_port()
        self.dashboard_port = free_port()
        self.address = f"http://127.0.0.1:{self.dashboard_port}"
        self.head: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"RAY_USAGE_STATS_ENABLED": "0"}

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        argv = [str(RAY), "start", "--block", "--node-ip-address=127.0.0.1", "--num-gpus=0", "--disable-usage-stats"]
        argv += [f"--object-store-memory={OBJECT_STORE_BYTES}", f"--dashboard-agent-listen-port={free_port()}"]
        log = open(Path(self.temp_dir) / f"{name}.log", "ab")  # noqa: SIM115 - the node's process writes it
        return subprocess.Popen(
            [*argv, *args], stdout=log, stderr=log, env=self.env, start_new_session=True, preexec_fn=_die_with_parent
        )

    def start(self) -> None:
        self.head = self._start(
            "head",
            [
                "--head", f"--port={self.gcs_port}", f"--temp-dir={self.temp_dir}", "--num-cpus=2",
                "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}", "--include-dashboard=true",
                f"--ray-client-server-port={free_port()}",
            ],
        )  # fmt: skip
        wait_for(self._job_server_up, 180, interval=0.5, what=f"the Ray head's job server at {self.address}")
        self.start_worker()

    def start_worker(self) -> None:
        labels = ",".join(f"{key}={value}" for key, value in WORKER_LABEL.items())
        resources = json.dumps({"eyas_worker": 1})
        self.worker = self._start(
            "worker",
            [f"--address=127.0.0.1:{self.gcs_port}", "--num-cpus=2", f"--resources={resources}", f"--labels={labels}"],
        )
        wait_for(lambda: self.alive_nodes() == 2, 180, interval=0.5, what="the Ray worker node to join")

    def kill_worker(self) -> None:
        """The worker node dies at once (SIGKILL to all of it), as a machine that loses power."""
        assert self.worker is not None
        _end(self.worker, signal.SIGKILL)
        wait_for(lambda: self.alive_nodes() == 1, 120, interval=0.5, what="Ray to see its worker node die")

    def _job_server_up(self) -> bool:
        assert self.head is not None
        if self.head.poll() is not None:
            log = (Path(self.temp_dir) / "head.log").read_text()[-2000:]
            raise AssertionError(f"ray start --head ended with {self.head.returncode}:\n{log}")
        try:
            with urllib.request.urlopen(f"{self.address}/api/version", timeout=5) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _nodes(self) -> list[dict[str, object]]:
        try:
            with urllib.request.urlopen(f"{self.address}/api/v0/nodes?limit=100", timeout=10) as response:
                return list(json.load(response)["data"]["result"]["result"])
        except (OSError, KeyError, ValueError):
            return []

    def alive_nodes(self) -> int:
        return sum(1 for node in self._nodes() if node["state"] == "ALIVE")

    def worker_node_id(self) -> str:
        """The live worker node's id, as Ray reports the node a job's entrypoint ran on."""
        [node_id] = [
            str(node["node_id"])
            for node in self._nodes()
            if node["state"] == "ALIVE" and WORKER_LABEL.items() <= dict(node.get("labels") or {}).items()  # type: ignore[call-overload]
        ]
        return node_id

    def stop(self) -> None:
        """Stop the worker, then the head, and every process each started."""
        for node in (self.worker, self.head):
            if node is not None:
                _end(node, signal.SIGTERM)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _die_with_parent() -> None:
    """In the node's `ray start`: SIGTERM when the test process dies, however it dies (a timeout's kill skips the
    fixture's teardown); `ray start --block` then stops everything it started."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        if not process_gone(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)


def _end(node: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """`sig` to a node's `ray start` and every process below it (Ray puts its workers and the jobs' entrypoints in
    process groups of their own), then SIGKILL to whatever is left after its grace."""
    pids = [node.pid, *descendants(node.pid)]
    _signal(pids, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        node.wait(timeout=15)
    _signal(pids, signal.SIGKILL)
    node.wait(timeout=30)
    for pid in pids:
        wait_for(lambda pid=pid: process_gone(pid), 60, interval=0.2, what=f"Ray process {pid} to end")
