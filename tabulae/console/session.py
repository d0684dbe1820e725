"""Console sessions: a signed cookie, the CSRF token derived from it, and signing in with a key.

The cookie holds no secret, so every worker process of the server accepts every session (they
share the per-server ``secret``, made by the composition root when the server starts;
restarting the server ends every session). The one state on the server is the list of
signed-out sessions (:mod:`.revocations`), which every worker reads: a copy of a cookie is
worth nothing once its session has signed out::

    cookie = base64url(payload) "." base64url(HMAC-SHA256(secret, payload))
    payload = "1|" account "|" key-fingerprint "|" issued-at "|" nonce

An anonymous visitor gets a session too (empty account and fingerprint), so the sign-in form
has a CSRF token like every other form. Signing in issues a new session with a new nonce, so a
nonce planted before sign-in is worth nothing after it.

* **Authorisation is checked on every request**, not only at sign-in: the fingerprint is
  ``HMAC(secret, key)`` of the key the user signed in with, and a session is valid only while
  one of the account's current keys has that fingerprint. Rotating a key ends the sessions
  opened with it; removing the account ends them all.
* **CSRF**: every form carries ``HMAC(secret, "csrf|" nonce)``; a POST without the token of its
  own session is refused. The cookie is also ``SameSite=Strict`` and ``HttpOnly``.
* Every comparison of a secret-derived value is constant-time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from tabulae.console.revocations import Revocations

COOKIE = "tabulae_console"
MAX_AGE = 8 * 3600  # seconds a session lasts after sign-in


@dataclass(frozen=True, slots=True)
class Session:
    """Who is at the keyboard: ``account`` is empty until they sign in."""

    account: str
    fingerprint: str
    issued: int
    nonce: str

    @property
    def signed_in(self) -> bool:
        return bool(self.account)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issues and checks sessions against the server's accounts (name -> keys)."""

    def __init__(
        self,
        secret: bytes,
        accounts: dict[str, list[bytes]],
        *,
        max_age: int = MAX_AGE,
        revocations: Revocations | None = None,
    ) -> None:
        if len(secret) < 16:
            raise ValueError("the console secret must have at least 16 bytes")
        self._secret = secret
        self._accounts = accounts
        self.max_age = max_age
        self._revocations = revocations if revocations is not None else Revocations()

    def _mac(self, *parts: bytes) -> bytes:
        return hmac.new(self._secret, b"|".join(parts), hashlib.sha256).digest()

    def _fingerprint(self, key: bytes) -> str:
        return _b64(self._mac(b"key", key)[:16])

    # ------------------------------------------------------------------------- the cookie

    def anonymous(self) -> Session:
        return Session("", "", int(time.time()), _b64(secrets.token_bytes(16)))

    def encode(self, session: Session) -> str:
        payload = f"1|{session.account}|{session.fingerprint}|{session.issued}|{session.nonce}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(b'session', payload))}"

    def decode(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session a cookie names, if its signature holds, it has not expired, and (signed
        in) the account still has the key it was opened with; else ``None``."""
        if not cookie or cookie.count(".") != 1 or len(cookie) > 1024:
            return None
        body, mac = cookie.split(".")
        try:
            payload = _unb64(body)
            given = _unb64(mac)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(given, self._mac(b"session", payload)):
            return None
        try:
            version, account, fingerprint, issued_text, nonce = payload.decode("ascii").split("|")
            issued = int(issued_text)
        except (UnicodeDecodeError, ValueError):
            return None
        current = time.time() if now is None else now
        if version != "1" or not nonce or not issued - 60 <= current <= issued + self.max_age:
            return None
        session = Session(account, fingerprint, issued, nonce)
        if session.signed_in and not self._key_still_valid(account, fingerprint):
            return None
        if session.signed_in and self._revocations.revoked(nonce):
            return None
        return session

    def _key_still_valid(self, account: str, fingerprint: str) -> bool:
        valid = False
        for key in self._accounts.get(account, ()):
            valid |= hmac.compare_digest(fingerprint, self._fingerprint(key))
        return valid

    # ------------------------------------------------------------------------------ sign-in

    def sign_in(self, account: str, key_text: str) -> Session | None:
        """A new signed-in session if ``key_text`` (base64) is one of the account's keys."""
        try:
            key = base64.b64decode(key_text.strip(), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        keys = self._accounts.get(account) or [secrets.token_bytes(64)]  # same work when unknown
        match: bytes | None = None
        for candidate in keys:
            if hmac.compare_digest(key, candidate) and key:
                match = candidate
        if match is None or account not in self._accounts:
            return None
        return Session(account, self._fingerprint(match), int(time.time()), _b64(secrets.token_bytes(16)))

    def sign_out(self, session: Session) -> Session:
        """End ``session`` in every worker (any copy of its cookie too); the anonymous one that
        follows it."""
        if session.signed_in:
            self._revocations.revoke(session.nonce, session.issued + self.max_age)
        return self.anonymous()

    # --------------------------------------------------------------------------------- CSRF

    def csrf_token(self, session: Session) -> str:
        return _b64(self._mac(b"csrf", session.nonce.encode())[:24])

    def check_csrf(self, session: Session, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.csrf_token(session).encode())
