"""What stands between a request and the dashboard's handlers, each named so a reader finds it: the Host check (DNS
rebinding), the security headers on every response, the login a page needs and the CSRF token a POST must carry.

It answers only requests addressed to it by a name it listens on (the Host header: loopback names or the --host
given, with its port), so a web page whose own name a DNS rebinding pointed at 127.0.0.1 reads nothing."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable

from starlette.datastructures import Headers
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from eyas.agents.faces.dashboard import views
from eyas.agents.faces.dashboard.auth import SESSION_COOKIE, Sessions

HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

Handler = Callable[[Request], Awaitable[Response]]
PageHandler = Callable[[Request, str], Awaitable[Response]]  # gets the session's CSRF token, for its forms
FormHandler = Callable[[Request, dict[str, str]], Awaitable[Response]]  # gets the posted form, its token checked


class SecurityHeaders(BaseHTTPMiddleware):
    """Every response uncacheable and framed by a strict content security policy."""

    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response


def served_hosts(bound: str, port: int) -> frozenset[str]:
    """The Host headers the dashboard answers: the loopback names and the address it was told to listen on, each
    with its port (alone too on port 80, where browsers leave it out)."""
    names = {*LOOPBACK_NAMES, _host_name(bound)}
    return frozenset({f"{name}:{port}" for name in names} | (names if port == 80 else set()))


def _host_name(address: str) -> str:
    """An address as a Host header names it: an IPv6 address in brackets, a name in lower case."""
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address.lower()


class HostCheck:
    """Refuses (400) every request whose Host header is not one of `hosts`: a DNS rebinding sends the browser's
    requests for an attacker's name to this port, Host and all, and this is where they stop."""

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(host.lower() for host in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host", "").lower()
            if host not in self.hosts:
                served = ", ".join(sorted(self.hosts))
                reason = f"refused: Host {host!r} is not this dashboard's address (it answers {served})\n"
                await PlainTextResponse(reason, 400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def login_required(sessions: Sessions, handler: PageHandler, *, fetched: bool = False) -> Handler:
    """A GET behind the login: a browser without a session goes to the login page; a script's fetch (`fetched`)
    gets 401."""

    async def guarded(request: Request) -> Response:
        csrf = sessions.csrf(request.cookies.get(SESSION_COOKIE))
        if csrf is None:
            return Response("log in first", 401) if fetched else RedirectResponse("/login", status_code=303)
        return await handler(request, csrf)

    return guarded


def csrf_required(sessions: Sessions, handler: FormHandler) -> Handler:
    """A POST behind the login and its session's CSRF token: refused (401 without a session, 403 without the right
    token) before the handler sees anything."""

    async def guarded(request: Request) -> Response:
        session = request.cookies.get(SESSION_COOKIE)
        if sessions.csrf(session) is None:
            return HTMLResponse(views.message_page("not logged in", "Log in with the dashboard's token."), 401)
        form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
        if not sessions.check_csrf(session, form.get("csrf", "")):
            return HTMLResponse(views.message_page("refused", "The form's CSRF token is missing or wrong."), 403)
        return await handler(request, form)

    return guarded
