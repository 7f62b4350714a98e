"""The one place eyas speaks HTTP to a server it verifies, so a replay can substitute the answers."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from eyas.tools.errors import HttpError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock
from eyas.tools.hosts.deadline_transport import deadline_client

DEFAULT_TIMEOUT_S = 10.0  # a deadline for the whole exchange, answer included


@dataclass(frozen=True)
class HttpResponse:
    method: str
    url: str
    status: int
    body: str
    duration_s: float

    def json(self) -> Any:
        """The body as JSON; raises ValueError naming the URL when the server answered something else."""
        try:
            return json.loads(self.body)
        except json.JSONDecodeError:
            snippet = self.body[:200].replace("\n", " ")
            raise ValueError(
                f"{self.method} {self.url} answered HTTP {self.status} with non-JSON: {snippet!r}"
            ) from None


class HttpClient:
    """Each request's `timeout` is a deadline for the whole exchange, answer included."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock

    def request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> HttpResponse:
        started = self._clock.monotonic()
        try:
            with deadline_client() as client:
                response = client.request(method, url, json=json_body, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise HttpError(f"{method} {url}: no complete answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise HttpError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        return HttpResponse(method, url, response.status_code, response.text, self._clock.monotonic() - started)

    def get(
        self, url: str, *, timeout: float = DEFAULT_TIMEOUT_S, headers: dict[str, str] | None = None
    ) -> HttpResponse:
        return self.request("GET", url, timeout=timeout, headers=headers)

    def post_json(
        self, url: str, body: Any, *, timeout: float = DEFAULT_TIMEOUT_S, headers: dict[str, str] | None = None
    ) -> HttpResponse:
        return self.request("POST", url, json_body=body, timeout=timeout, headers=headers)

    def tcp_connect(self, url: str, *, timeout: float = 5.0) -> float:
        """Seconds to open a TCP connection to the URL's host and port; raises HttpError when refused."""
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        started = self._clock.monotonic()
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=timeout):
                pass
        except OSError as exc:
            raise HttpError(f"TCP connect to {parts.hostname}:{port} failed: {exc.strerror or exc}") from None
        return self._clock.monotonic() - started
