"""The dashboard's ASGI app (Starlette): pages read run folders; the one state-changing request records a gate's
answer as `eyas approve` does. Every response is uncacheable and framed by a strict content security policy.

It answers only requests addressed to it by a name it listens on (the Host header: loopback names or the --host
given, with its port), so a web page whose own name a DNS rebinding pointed at 127.0.0.1 reads nothing; and it
slows down a client that guesses tokens (auth.LoginThrottle)."""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from eyas.agents.faces.dashboard import views
from eyas.agents.faces.dashboard.auth import SESSION_COOKIE, SESSION_LIFETIME_S, LoginThrottle, Sessions
from eyas.agents.faces.dashboard.forms import GateForm
from eyas.agents.faces.dashboard.snapshots import Snapshots
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.life.answers import pending_view, record_gate_answer
from eyas.graph.life.watch import driver_phrase, runs_listing
from eyas.graph.run_damage import damage
from eyas.graph.runs import RunDir, is_run_id
from eyas.tools.errors import EyasError
from eyas.tools.settings.config import format_validation_error

HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
SCRIPT = Path(__file__).with_name("live.js")

Handler = Callable[[Request], Awaitable[Response]]


class SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


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


def create_app(runs_root: Path, sessions: Sessions, hosts: Iterable[str]) -> Starlette:
    """The dashboard over the runs folder `runs_root`, for whoever logs in with the token `sessions` holds, at the
    addresses `hosts` (Host headers, with their port: served_hosts)."""
    snapshots = Snapshots()
    throttle = LoginThrottle(sessions.clock)

    def csrf_of(request: Request) -> str | None:
        return sessions.csrf(request.cookies.get(SESSION_COOKIE))

    def page(handler: Callable[[Request, str], Awaitable[Response]], *, fetched: bool = False) -> Handler:
        """A GET behind the login: a browser without a session goes to the login page; a script's fetch gets 401."""

        async def guarded(request: Request) -> Response:
            csrf = csrf_of(request)
            if csrf is None:
                return Response("log in first", 401) if fetched else RedirectResponse("/login", status_code=303)
            return await handler(request, csrf)

        return guarded

    def posted(handler: Callable[[Request, dict[str, str]], Awaitable[Response]]) -> Handler:
        """A POST behind the login and its CSRF token; refused before the handler sees anything otherwise."""

        async def guarded(request: Request) -> Response:
            session = request.cookies.get(SESSION_COOKIE)
            if sessions.csrf(session) is None:
                return HTMLResponse(views.message_page("not logged in", "Log in with the dashboard's token."), 401)
            form = {key: value for key, value in (await request.form()).items() if isinstance(value, str)}
            if not sessions.check_csrf(session, form.get("csrf", "")):
                return HTMLResponse(views.message_page("refused", "The form's CSRF token is missing or wrong."), 403)
            return await handler(request, form)

        return guarded

    def run_of(request: Request) -> RunDir | None:
        run_id = request.path_params["run_id"]
        run = RunDir(runs_root / run_id) if is_run_id(run_id) else None
        return run if run is not None and run.meta_path.exists() else None

    async def login_form(request: Request) -> Response:
        return HTMLResponse(views.login_page())

    def slow_down(wait_s: float) -> Response:
        seconds = math.ceil(wait_s)
        page = views.login_page(f"Too many wrong tokens from this address: try again in {seconds} s.")
        return HTMLResponse(page, 429, headers={"Retry-After": str(seconds)})

    async def login(request: Request) -> Response:
        client = request.client.host if request.client else "?"
        wait_s = throttle.wait_s(client)
        if wait_s > 0:
            return slow_down(wait_s)  # not even compared: while it waits, a client learns nothing
        given = (await request.form()).get("token")
        session = sessions.login(given) if isinstance(given, str) else None
        if session is None:
            wait_s = throttle.wrong(client)
            if wait_s > 0:
                return slow_down(wait_s)
            return HTMLResponse(views.login_page("That is not the dashboard's token."), 401)
        throttle.right(client)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, session, max_age=int(SESSION_LIFETIME_S), httponly=True,
                            samesite="strict", path="/")  # fmt: skip
        return response

    async def logout(request: Request, form: dict[str, str]) -> Response:
        sessions.logout(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    async def runs(request: Request, csrf: str) -> Response:
        def rows() -> list[tuple[str, str, str, str]]:
            listed = runs_listing(runs_root, time.time())
            return [(row["run"], row["phase"], row["damage"] or row["state"], driver_phrase(row["driver"]))
                    for row in listed]  # fmt: skip

        listed = await run_in_threadpool(rows)
        return HTMLResponse(views.runs_page(listed, str(runs_root), csrf))

    async def run_page(request: Request, csrf: str) -> Response:
        run = run_of(request)
        if run is None:
            return HTMLResponse(views.message_page("no such run", "There is no such run in the runs folder."), 404)
        found = await run_in_threadpool(damage, run)
        if found is not None:
            return HTMLResponse(views.message_page("damaged run", found.text()), 409)
        now = await run_in_threadpool(snapshots.read, run)
        gate = ""
        if now.pending is not None:
            gate_id, view = now.pending
            gate = views.gate_panel(run.run_id, gate_id, view, csrf, run.answer_for(gate_id))
        return HTMLResponse(views.run_page(run.run_id, gate, now.html, csrf, now.gate_id))

    async def live_part(request: Request, csrf: str) -> Response:
        run = run_of(request)
        if run is None:
            return Response("no such run", 404)
        found = await run_in_threadpool(damage, run)
        if found is not None:
            return Response(found.text(), 409)
        now = await run_in_threadpool(snapshots.read, run)
        return HTMLResponse(now.html, headers={"X-Eyas-Gate": now.gate_id or ""})

    async def answer(request: Request, form: dict[str, str]) -> Response:
        run = run_of(request)
        if run is None:
            return HTMLResponse(views.message_page("no such run", "There is no such run in the runs folder."), 404)
        try:
            parsed = GateForm.parse(form)
            _, view = await run_in_threadpool(pending_view, run)
            shown = read_view(view)
            sizes = shown.sizes if isinstance(shown, GateView) else {}
            await run_in_threadpool(record_gate_answer, run, parsed.answer(sizes), parsed.gate_id)
        except ValidationError as exc:
            return HTMLResponse(views.message_page("not recorded", "; ".join(format_validation_error(exc))), 400)
        except EyasError as exc:
            return HTMLResponse(views.message_page("not recorded", str(exc)), 409)
        return RedirectResponse(f"/runs/{run.run_id}", status_code=303)

    async def script(request: Request, csrf: str) -> Response:
        return FileResponse(SCRIPT, media_type="text/javascript")

    routes = [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", posted(logout), methods=["POST"]),
        Route("/", page(runs), methods=["GET"]),
        Route("/runs/{run_id}", page(run_page), methods=["GET"]),
        Route("/runs/{run_id}/live", page(live_part, fetched=True), methods=["GET"]),
        Route("/runs/{run_id}/answer", posted(answer), methods=["POST"]),
        Route("/static/live.js", page(script, fetched=True), methods=["GET"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders), Middleware(HostCheck, hosts=hosts)])
