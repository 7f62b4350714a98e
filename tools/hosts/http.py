"""The one place eyas speaks HTTP to a server it verifies, so a replay can substitute the answers."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock


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


class HttpError(Exception):
    """No HTTP answer at all: refused, timed out, reset."""


class HttpClient:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock

    def request(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> HttpResponse:
        started = self._clock.monotonic()
        try:
            response = httpx.request(method, url, json=json_body, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise HttpError(f"{method} {url}: no answer within {timeout:.0f} s") from None
        except httpx.HTTPError as exc:
            raise HttpError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        return HttpResponse(method, url, response.status_code, response.text, self._clock.monotonic() - started)

    def get(self, url: str, *, timeout: float = 10.0, headers: dict[str, str] | None = None) -> HttpResponse:
        return self.request("GET", url, timeout=timeout, headers=headers)

    def post_json(
        self, url: str, body: Any, *, timeout: float = 10.0, headers: dict[str, str] | None = None
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
