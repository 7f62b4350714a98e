"""Who may use the dashboard: whoever holds its token. Logging in with it opens a session (a random id in an
HttpOnly, SameSite=Strict cookie) with its own CSRF token, which every POST must carry. Tokens are compared in
constant time; none ever travels in a URL, so none reaches an access log or the browser's history.

A session ends SESSION_IDLE_S after its last request and SESSION_LIFETIME_S after its login, whichever is first
(a browser left open on a shared machine does not stay logged in); then the browser is sent to log in again. A
client that gives wrong tokens is slowed down: after FREE_TRIES, each further try waits a delay that doubles (up
to MAX_DELAY_S), so guessing the token takes lifetimes while a person who mistyped waits seconds."""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass, field

from eyas.tools.errors import EyasError
from eyas.tools.hosts.clock import SYSTEM_CLOCK, Clock

TOKEN_ENV = "EYAS_UI_TOKEN"
SESSION_COOKIE = "eyas_session"
MIN_TOKEN_LENGTH = 16
SESSION_LIFETIME_S = 12 * 3600.0  # from the login, however busy the session
SESSION_IDLE_S = 2 * 3600.0  # from the session's last request
FREE_TRIES = 5  # wrong tokens a client may give before it must wait
FIRST_DELAY_S = 1.0  # the wait after the first wrong token past FREE_TRIES; it doubles with each one after
MAX_DELAY_S = 900.0
FORGET_AFTER_S = 3600.0  # a client's wrong tries are forgotten this long after its wait ended


def same(given: str, expected: str) -> bool:
    """Equal, in time that does not depend on where the two differ."""
    return hmac.compare_digest(given.encode(), expected.encode())


def dashboard_token() -> tuple[str, bool]:
    """The token from $EYAS_UI_TOKEN, else a new random one; and whether it was made here (then the operator
    must be shown it once)."""
    given = os.environ.get(TOKEN_ENV)
    if given is None:
        return secrets.token_urlsafe(32), True
    if len(given) < MIN_TOKEN_LENGTH:
        raise EyasError(f"${TOKEN_ENV} is shorter than {MIN_TOKEN_LENGTH} characters; use a long random one.")
    return given, False


@dataclass
class _Session:
    csrf: str
    started: float
    seen: float


@dataclass
class Sessions:
    """The logged-in browsers of one dashboard process: session id -> its CSRF token and times. A restart logs all
    out; so does time (SESSION_IDLE_S, SESSION_LIFETIME_S), read from `clock` so a test can move it."""

    token: str
    clock: Clock = SYSTEM_CLOCK
    _sessions: dict[str, _Session] = field(default_factory=dict)

    def login(self, given: str) -> str | None:
        """A new session id when `given` is the token, else None."""
        if not same(given, self.token):
            return None
        session = secrets.token_urlsafe(32)
        now = self.clock.monotonic()
        self._sessions[session] = _Session(csrf=secrets.token_urlsafe(32), started=now, seen=now)
        return session

    def csrf(self, session: str | None) -> str | None:
        """The session's CSRF token, and the session kept alive; None for a missing, unknown or expired one."""
        if not session:
            return None
        now = self.clock.monotonic()
        self._sessions = {known: open_ for known, open_ in self._sessions.items() if not _expired(open_, now)}
        # Look every known session up by constant-time comparison, so timing says nothing about valid ids.
        found = [open_ for known, open_ in self._sessions.items() if same(session, known)]
        if not found:
            return None
        found[0].seen = now
        return found[0].csrf

    def check_csrf(self, session: str | None, given: str) -> bool:
        expected = self.csrf(session)
        return expected is not None and same(given, expected)

    def logout(self, session: str | None) -> None:
        if session:
            self._sessions = {known: open_ for known, open_ in self._sessions.items() if not same(session, known)}


def _expired(session: _Session, now: float) -> bool:
    return now - session.seen >= SESSION_IDLE_S or now - session.started >= SESSION_LIFETIME_S


@dataclass
class _Tries:
    wrong: int = 0
    until: float = 0.0  # no try is taken before this (monotonic seconds)


@dataclass
class LoginThrottle:
    """Wrong tokens per client address, and how long each must wait before its next try."""

    clock: Clock = SYSTEM_CLOCK
    _clients: dict[str, _Tries] = field(default_factory=dict)

    def wait_s(self, client: str) -> float:
        """Seconds until `client` may try a token again; 0 when it may now."""
        tries = self._clients.get(client)
        return max(0.0, tries.until - self.clock.monotonic()) if tries else 0.0

    def wrong(self, client: str) -> float:
        """Count a wrong token from `client`: the seconds it must now wait (0 while it has free tries left)."""
        now = self.clock.monotonic()
        self._clients = {known: tries for known, tries in self._clients.items()
                         if now - tries.until < FORGET_AFTER_S}  # fmt: skip
        tries = self._clients.setdefault(client, _Tries())
        tries.wrong += 1
        past = tries.wrong - FREE_TRIES
        delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2.0 ** min(past - 1, 30)) if past > 0 else 0.0
        tries.until = now + delay
        return delay

    def right(self, client: str) -> None:
        """The client gave the token: its wrong tries are forgotten."""
        self._clients.pop(client, None)
