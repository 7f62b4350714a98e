"""The dashboard's ASGI app (Starlette): pages read run folders; the one state-changing request records a gate's
answer as `eyas approve` does. What guards every request (the Host check, the security headers, the login and the
CSRF token) is in guards.py; a client that guesses tokens is slowed down (auth.LoginThrottle)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from eyas.agents.faces.dashboard import views
from eyas.agents.faces.dashboard.auth import SESSION_COOKIE, SESSION_LIFETIME_S, LoginThrottle, Sessions
from eyas.agents.faces.dashboard.forms import GateForm
from eyas.agents.faces.dashboard.guards import HostCheck, SecurityHeaders, csrf_required, login_required
from eyas.agents.faces.dashboard.snapshots import Snapshots
from eyas.agents.faces.dashboard.standing import ListedRun, in_order, listed_run
from eyas.graph.gates.view import GateView, read_view
from eyas.graph.life.answers import pending_view, record_gate_answer
from eyas.graph.life.watch import driver_phrase, runs_listing
from eyas.graph.run_damage import damage
from eyas.graph.runs import RunDir, is_run_id
from eyas.tools.errors import EyasError
from eyas.tools.settings.config import format_validation_error

SCRIPT = Path(__file__).with_name("live.js")


class LoginPages:
    """Logging in with the dashboard's token (slowed down per client address after wrong ones) and out."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.throttle = LoginThrottle(sessions.clock)

    async def form(self, request: Request) -> Response:
        return HTMLResponse(views.login_page())

    async def login(self, request: Request) -> Response:
        client = request.client.host if request.client else "?"
        wait_s = self.throttle.wait_s(client)
        if wait_s > 0:
            return self.slow_down(wait_s)  # not even compared: while it waits, a client learns nothing
        given = (await request.form()).get("token")
        session = self.sessions.login(given) if isinstance(given, str) else None
        if session is None:
            wait_s = self.throttle.wrong(client)
            if wait_s > 0:
                return self.slow_down(wait_s)
            return HTMLResponse(views.login_page("That is not the dashboard's token."), 401)
        self.throttle.right(client)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(SESSION_COOKIE, session, max_age=int(SESSION_LIFETIME_S), httponly=True,
                            samesite="strict", path="/")  # fmt: skip
        return response

    @staticmethod
    def slow_down(wait_s: float) -> Response:
        seconds = math.ceil(wait_s)
        page = views.login_page(f"Too many wrong tokens from this address: try again in {seconds} s.")
        return HTMLResponse(page, 429, headers={"Retry-After": str(seconds)})

    async def logout(self, request: Request, form: dict[str, str]) -> Response:
        self.sessions.logout(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response


class RunPages:
    """The runs folder `runs_root` as pages: the list of runs, a run with its pending gate, the part of it that
    live.js refreshes, and a gate's answer. Each gets the session's CSRF token or the checked form (guards.py)."""

    def __init__(self, runs_root: Path) -> None:
        self.runs_root = runs_root
        self.snapshots = Snapshots()

    def run_of(self, request: Request) -> RunDir | None:
        run_id = request.path_params["run_id"]
        run = RunDir(self.runs_root / run_id) if is_run_id(run_id) else None
        return run if run is not None and run.meta_path.exists() else None

    async def runs(self, request: Request, csrf: str) -> Response:
        def rows() -> list[ListedRun]:
            now = time.time()
            return in_order([listed_run(row, driver_phrase(row["driver"]), now)
                             for row in runs_listing(self.runs_root, now)])  # fmt: skip

        listed = await run_in_threadpool(rows)
        return HTMLResponse(views.runs_page(listed, str(self.runs_root), csrf))

    async def run_page(self, request: Request, csrf: str) -> Response:
        run = self.run_of(request)
        if run is None:
            return HTMLResponse(views.message_page("no such run", "There is no such run in the runs folder."), 404)
        found = await run_in_threadpool(damage, run)
        if found is not None:
            return HTMLResponse(views.message_page("damaged run", found.text()), 409)
        now = await run_in_threadpool(self.snapshots.read, run)
        gate = ""
        if now.pending is not None:
            gate_id, view = now.pending
            gate = views.gate_panel(run.run_id, gate_id, view, csrf, run.answer_for(gate_id))
        return HTMLResponse(views.run_page(run.run_id, now.lead, gate, now.html, csrf, now.gate_id))

    async def live_part(self, request: Request, csrf: str) -> Response:
        run = self.run_of(request)
        if run is None:
            return Response("no such run", 404)
        found = await run_in_threadpool(damage, run)
        if found is not None:
            return Response(found.text(), 409)
        now = await run_in_threadpool(self.snapshots.read, run)
        return HTMLResponse(views.live_parts(now.lead, now.html), headers={"X-Eyas-Gate": now.gate_id or ""})

    async def answer(self, request: Request, form: dict[str, str]) -> Response:
        run = self.run_of(request)
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

    async def script(self, request: Request, csrf: str) -> Response:
        return FileResponse(SCRIPT, media_type="text/javascript")


def create_app(runs_root: Path, sessions: Sessions, hosts: Iterable[str]) -> Starlette:
    """The dashboard over the runs folder `runs_root`, for whoever logs in with the token `sessions` holds, at the
    addresses `hosts` (Host headers, with their port: guards.served_hosts)."""
    logins, pages = LoginPages(sessions), RunPages(runs_root)
    routes = [
        Route("/login", logins.form, methods=["GET"]),
        Route("/login", logins.login, methods=["POST"]),
        Route("/logout", csrf_required(sessions, logins.logout), methods=["POST"]),
        Route("/", login_required(sessions, pages.runs), methods=["GET"]),
        Route("/runs/{run_id}", login_required(sessions, pages.run_page), methods=["GET"]),
        Route("/runs/{run_id}/live", login_required(sessions, pages.live_part, fetched=True), methods=["GET"]),
        Route("/runs/{run_id}/answer", csrf_required(sessions, pages.answer), methods=["POST"]),
        Route("/static/live.js", login_required(sessions, pages.script, fetched=True), methods=["GET"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders), Middleware(HostCheck, hosts=hosts)])
