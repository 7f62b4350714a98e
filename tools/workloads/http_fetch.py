"""One HTTP request under a deadline for the whole exchange, in plain Python.

urllib's timeout bounds each socket read, so a server that sends a byte every few seconds keeps a request
alive for ever. Here a timer shuts the socket down when the deadline passes, which ends any read at once.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit


class DeadlineExceeded(TimeoutError):
    """The server did not answer completely within the deadline."""


class HttpStatusError(OSError):
    """The server answered with an error status."""

    def __init__(self, url: str, status: int, body: bytes) -> None:
        super().__init__(f"{url} answered HTTP {status}: {body[:300].decode(errors='replace')}")
        self.status = status


def fetch(url: str, body: dict[str, Any] | None = None, *, deadline_s: float) -> bytes:
    """GET `url`, or POST `body` as JSON; the answer's body, complete within `deadline_s` seconds or
    DeadlineExceeded. An answer other than 2xx raises HttpStatusError."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=deadline_s)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        if connection.sock is not None:
            with contextlib.suppress(OSError):  # already closed: the exchange ended by itself
                connection.sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_s, expire)
    timer.daemon = True
    timer.start()
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    data = json.dumps(body).encode() if body is not None else None
    try:
        connection.request("GET" if data is None else "POST", path, data, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise DeadlineExceeded(f"{url}: no complete answer within {deadline_s:g} s") from None
        raise
    finally:
        timer.cancel()
        connection.close()
    if expired.is_set():  # the timer fired as the last byte arrived: late all the same
        raise DeadlineExceeded(f"{url}: no complete answer within {deadline_s:g} s")
    if not 200 <= response.status < 300:
        raise HttpStatusError(url, response.status, answer)
    return answer
