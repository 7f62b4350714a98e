"""A real HTTP server on 127.0.0.1 that answers one byte at a time, every `interval_s` seconds.

Each byte arrives well within any per-read timeout, so only a deadline on the whole exchange ends a
request to it. `phase` picks what is trickled: the status line and headers, or only the body.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Phase = Literal["headers", "body"]
BODY = b'{"object": "list", "data": [{"id": "trickled"}], "padding": "' + b"x" * 40 + b'"}'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)


@contextmanager
def trickle_server(phase: Phase, interval_s: float = 0.1) -> Iterator[str]:
    """Serve every request with HEAD + BODY, the `phase` part one byte per `interval_s`; yields the base URL."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def answer(connection: socket.socket) -> None:
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                received += chunk
            instant, trickled = (b"", HEAD + BODY) if phase == "headers" else (HEAD, BODY)
            try:
                connection.sendall(instant)
                for byte in trickled:
                    if stop.wait(interval_s):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                return  # the client gave up: what the tests want

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(), which a close alone may not
        listener.close()
        thread.join(timeout=5)
