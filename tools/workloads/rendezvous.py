"""Where the nodes of one distributed training run meet: node 0 publishes its address and a free port in a
file on the storage every node shares (the run's work directory), and the other nodes wait until that address
answers. A file left by an earlier attempt names a port nobody listens on any more, so a late node keeps
reading until node 0 of this attempt has published and is listening; nothing has to clean up after a kill.

Plain Python, no dependencies: train.py imports it on the host.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

FILE_NAME = "master.json"
ADDRESS_ENV = "EYAS_NODE_ADDRESS"  # overrides the address node 0 publishes (its hostname's, by default)
POLL_S = 1.0


def node_address() -> str:
    """The address the other nodes reach this one at: EYAS_NODE_ADDRESS, else what the hostname resolves to."""
    return os.environ.get(ADDRESS_ENV) or socket.gethostbyname(socket.gethostname())


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def publish(directory: Path) -> tuple[str, int]:
    """Node 0: choose a free port on this node and write both where the others look (atomically)."""
    address = node_address()
    port = free_port(address)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{FILE_NAME}.{os.getpid()}"
    tmp.write_text(json.dumps({"address": address, "port": port, "pid": os.getpid()}))
    os.replace(tmp, directory / FILE_NAME)
    return address, port


def published(directory: Path) -> tuple[str, int] | None:
    try:
        record = json.loads((directory / FILE_NAME).read_text())
        return str(record["address"]), int(record["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def answers(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=5):
            return True
    except OSError:
        return False


def find(directory: Path, timeout_s: float) -> tuple[str, int]:
    """Nodes 1..N-1: node 0's address and port, once it listens there; SystemExit after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        master = published(directory)
        if master is not None and answers(*master):
            return master
        if time.monotonic() > deadline:
            seen = f"the last address there, {master[0]}:{master[1]}, does not answer" if master else "it is empty"
            raise SystemExit(
                f"train.py: node 0 of this training run did not publish a reachable address in {directory / FILE_NAME} "
                f"within {timeout_s:.0f} s ({seen}). Check that node 0's job is running, that --rendezvous is on "
                f"storage every node shares, and that this node reaches node 0 (set {ADDRESS_ENV} on node 0 to an "
                "address the others can reach)."
            )
        time.sleep(POLL_S)
