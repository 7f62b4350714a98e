"""The dashboard's ASGI app (Starlette): pages read run folders; the one state-changing request records a gate's
answer as `eyas approve` does. Every response is uncacheable and framed by a strict content security policy."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from eyas.agents.faces.dashboard import views
from eyas.agents.faces.dashboard.auth import SESSION_COOKIE, Sessions
from eyas.agents.faces.dashboard.forms import GateForm
from eyas.agents.faces.dashboard.snapshots import Snapshots
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


def create_app(runs_root: Path, sessions: Sessions) -> Starlette:
    """The dashboard over the runs folder `runs_root`, for whoever logs in with the token `sessions` holds."""
    snapshots = Snapshots()

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

    async def login(request: Request) -> Response:
        given = (await request.form()).get("token")
        session = sessions.login(given) if isinstance(given, str) else None
        if session is None:
            return HTMLResponse(views.login_page("That is not the dashboard's token."), 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
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
            await run_in_threadpool(record_gate_answer, run, parsed.answer(view.get("sizes", {})), parsed.gate_id)
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
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)])
