"""HTTP with a deadline for the whole exchange: httpx times each read, so a server that trickles one byte
every few seconds would never trip its timeout. Here the request's timeout bounds connect, send and the
complete answer together."""

from __future__ import annotations

import asyncio
import functools
import ssl

import httpx


class DeadlineExceeded(httpx.TimeoutException):
    """The whole exchange outlasted the request's timeout."""


class AnswerTooLarge(httpx.TransportError):
    """The answer grew past the client's `max_bytes`: reading stops there, so a runaway answer never fills memory."""


def total_deadline(request: httpx.Request) -> float | None:
    """The request's longest timeout (connect, read, write or pool), taken as the bound of the exchange."""
    timeouts = request.extensions.get("timeout", {})
    bounds = [value for value in timeouts.values() if value is not None]
    return max(bounds) if bounds else None


class DeadlineTransport(httpx.BaseTransport):
    """A synchronous transport that reads each answer whole, under one deadline (and at most `max_bytes` of it).
    It runs the exchange on an event loop of its own, because only a cancelled read ends promptly; so it is for
    threads without one."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = total_deadline(request)
        request.read()  # the body in memory, so the async client can send it
        try:
            status, headers, raw = asyncio.run(_exchange(request, deadline, self.max_bytes))
        except TimeoutError:
            raise DeadlineExceeded(f"no complete answer within {deadline:g} s", request=request) from None
        return httpx.Response(status, headers=headers, content=raw)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every exchange: building it reads the CA bundle, which costs more than a request."""
    return httpx.create_ssl_context()


async def _exchange(
    request: httpx.Request, deadline: float | None, max_bytes: int | None
) -> tuple[int, httpx.Headers, bytes]:
    async with asyncio.timeout(deadline), httpx.AsyncClient(verify=_tls()) as client:
        response = await client.send(request, stream=True)
        chunks, size = [], 0
        try:
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise AnswerTooLarge(f"an answer of more than {max_bytes:,} bytes", request=request)
                chunks.append(chunk)
        finally:
            await response.aclose()
    return response.status_code, response.headers, b"".join(chunks)


def deadline_client(max_bytes: int | None = None) -> httpx.Client:
    """A synchronous client whose every request ends by its timeout, and whose answers stop at `max_bytes`
    (proxies from the environment apply)."""
    return httpx.Client(transport=DeadlineTransport(max_bytes), trust_env=False)
