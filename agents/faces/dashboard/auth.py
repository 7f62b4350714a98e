"""Who may use the dashboard: whoever holds its token. Logging in with it opens a session (a random id in an
HttpOnly, SameSite=Strict cookie) with its own CSRF token, which every POST must carry. Tokens are compared in
constant time; none ever travels in a URL, so none reaches an access log or the browser's history."""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass, field

from eyas.tools.errors import EyasError

TOKEN_ENV = "EYAS_UI_TOKEN"
SESSION_COOKIE = "eyas_session"
MIN_TOKEN_LENGTH = 16


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
class Sessions:
    """The logged-in browsers of one dashboard process: session id -> its CSRF token. A restart logs all out."""

    token: str
    _csrf: dict[str, str] = field(default_factory=dict)

    def login(self, given: str) -> str | None:
        """A new session id when `given` is the token, else None."""
        if not same(given, self.token):
            return None
        session = secrets.token_urlsafe(32)
        self._csrf[session] = secrets.token_urlsafe(32)
        return session

    def csrf(self, session: str | None) -> str | None:
        """The session's CSRF token; None for a missing or unknown session."""
        if not session:
            return None
        # Look every known session up by constant-time comparison, so timing says nothing about valid ids.
        found = [csrf for known, csrf in self._csrf.items() if same(session, known)]
        return found[0] if found else None

    def check_csrf(self, session: str | None, given: str) -> bool:
        expected = self.csrf(session)
        return expected is not None and same(given, expected)

    def logout(self, session: str | None) -> None:
        if session:
            self._csrf = {known: csrf for known, csrf in self._csrf.items() if not same(session, known)}
