"""The web console's ASGI app, mounted by the gateway at ``/-/console``.

Every request passes one door (:class:`ConsoleGuard`) before any page sees it:

0. the ``Host`` it was sent to is a loopback name (``localhost``, ``127.x.x.x``, ``[::1]``) or
   one the operator named (``--console-host``, and the address the server listens on), else
   403 and nothing more: a page of another site whose name an attacker points at this machine
   (DNS rebinding) is the same origin as its own pages, and would otherwise read the console;
1. the session cookie is read and verified (:mod:`.session`); a visitor without one gets an
   anonymous session, so that even the sign-in form carries a CSRF token;
2. anything but the sign-in page itself and the static files needs a signed-in session (GET: a
   redirect to sign-in; anything else: 403);
3. a POST must come from the console itself (``Origin``, when sent, is this server), stay under
   the body cap, arrive at the pace the API's bodies must (``--request-timeout``: a client that
   trickles its form is cut off, as on the services' ports), and carry the CSRF token of its
   session; its form is parsed once, here. Only a signed-in session's POST to a path ending in
   ``/upload`` may carry a file (one, under the upload cap; starlette spools it to a temporary
   file, closed when the response is sent): the form is read before its token can be checked,
   so a visitor who has not signed in never gets the upload cap's room on disk;
4. every response says: no caching, no framing, no sniffing, scripts and styles from this
   server only (``Content-Security-Policy``), and no referrer beyond this origin.

While the data volume is full, a POST that writes is refused up front (503, the API's
``ServerBusy`` and its message), as the front-ends refuse an API write, before its form (or
file) is read: it would only use up the room deletes need. The POSTs that free space run: those
of a handler named ``delete_…``, ``remove_…``, ``clear_…`` or ``drop_…``, and signing in and out.

Pages never open a store: they call the same service objects as the HTTP front-ends, as the
signed-in account, so admission control (targets, faults) and the insight counters apply to
the console exactly as to an SDK request made with that account's key.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, MutableMapping, Sequence
from importlib.resources import files
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from tabulae.console.pages import ConsolePage
from tabulae.console.render import CONSOLE_PATH, ENV, form_of, html_page, redirect, render
from tabulae.console.revocations import Revocations
from tabulae.console.session import COOKIE, Session, Sessions
from tabulae.http.exchange import receive_paced
from tabulae.http.hosts import host_name, is_loopback_name, scope_host
from tabulae.model.errors import VOLUME_FULL_MESSAGE, ServiceError

log = logging.getLogger("tabulae.console")

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_NO_STORE = [("cache-control", "no-store"), ("x-content-type-options", "nosniff")]
_STATIC = CONSOLE_PATH + "/static/"
_SIGN_IN = CONSOLE_PATH + "/signin"
_NO_STORE_WRITES = (CONSOLE_PATH + "/signin", CONSOLE_PATH + "/signout")
MAX_FORM_FIELDS = 3000  # an entity has at most 252 properties, 3 fields each
MAX_UPLOAD_BYTES = 256 * 1024 * 1024  # a file uploaded through the console (larger: use an SDK)
UPLOAD_SUFFIX = "/upload"
BODY_TIMEOUT = 30.0  # seconds a form's body may pause (the server passes --request-timeout)
FREES_SPACE = ("delete_", "remove_", "clear_", "drop_")  # POST handlers that run while the volume is full


class Volume(Protocol):
    """The data volume as the console sees it (``storage.volume.Volume``)."""

    @property
    def full(self) -> bool: ...

    def still_full(self) -> bool: ...


class SignIn:
    """The sign-in and sign-out forms (the only pages an anonymous session reaches)."""

    def __init__(self, sessions: Sessions, first_page: str, prefill: tuple[str, str] | None) -> None:
        self.sessions = sessions
        self.first_page = first_page
        self.prefill = prefill  # (account, key) of the well-known development account, on loopback

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/signin", self.show, methods=["GET"]),
            Route("/signin", self.submit, methods=["POST"]),
            Route("/signout", self.sign_out, methods=["POST"]),
            Route("/", self.home, methods=["GET"]),
        ]

    async def show(self, request: Request) -> Response:
        account, key = self.prefill or ("", "")
        return render(request, "signin.html", name=account, key=key, failed=False)

    async def submit(self, request: Request) -> Response:
        form = form_of(request)
        name = str(form.get("account", "")).strip()
        session = self.sessions.sign_in(name, str(form.get("key", "")))
        if session is None:
            log.info("console sign-in refused for account %r", name[:64])
            return render(request, "signin.html", status=403, name=name, key="", failed=True)
        request.state.new_session = session
        return redirect("/" + self.first_page)

    async def sign_out(self, request: Request) -> Response:
        request.state.new_session = self.sessions.sign_out(request.state.session)
        return redirect("/signin")

    async def home(self, request: Request) -> Response:
        return redirect("/" + self.first_page)


_WRONG_HOST = (
    b"This console answers only at localhost, 127.0.0.1 or [::1], and at the names its server "
    b"was given with --console-host.\n"
)


class ConsoleGuard:
    """The door every console request passes (the module docstring lists what it checks)."""

    def __init__(
        self,
        app: Any,
        sessions: Sessions,
        nav: list[tuple[str, str]],
        max_body: int,
        max_upload: int = MAX_UPLOAD_BYTES,
        body_timeout: float = BODY_TIMEOUT,
        hosts: Collection[str] = (),
        volume: Volume | None = None,
        frees_space: Sequence[re.Pattern[str]] = (),
    ) -> None:
        self.app = app
        self.volume = volume
        self.frees_space = frees_space  # the paths (under the console's) of POSTs that free space
        self.sessions = sessions
        self.nav = nav
        self.max_body = max_body
        self.max_upload = max_upload
        self.body_timeout = body_timeout
        self.hosts = frozenset(host_name(host) for host in hosts)

    def _host_allowed(self, scope: dict[str, Any]) -> bool:
        host = scope_host(scope["headers"])
        return host is not None and (is_loopback_name(host) or host in self.hosts)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if not self._host_allowed(scope):
            await PlainTextResponse(_WRONG_HOST, status_code=403, headers=dict(_NO_STORE))(
                scope, receive, send
            )
            return
        request = Request(scope, receive)
        session = self.sessions.decode(request.cookies.get(COOKIE))
        fresh = session is None
        if session is None:
            session = self.sessions.anonymous()
        state = scope.setdefault("state", {})
        state.update(session=session, csrf=self.sessions.csrf_token(session), nav=self.nav)
        path: str = scope["path"]
        state["current"] = path[len(CONSOLE_PATH) + 1 :].split("/", 1)[0]
        secure = scope.get("scheme") == "https"
        static = path.startswith(_STATIC)  # a page's files: they never start a session

        async def send_guarded(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"cache-control"]
                headers.extend(SECURITY_HEADERS)
                new: Session | None = state.get("new_session")
                if new is not None or (fresh and not static):
                    headers.append((b"set-cookie", self._cookie(new or session, secure)))
                message = {**message, "headers": headers}
            await send(message)

        is_open = path == _SIGN_IN or path.startswith(_STATIC)
        method = scope["method"]
        if not session.signed_in and not is_open:
            if method in ("GET", "HEAD"):
                to_signin = RedirectResponse(CONSOLE_PATH + "/signin", status_code=303)
                await to_signin(scope, receive, send_guarded)
            else:
                await self._refuse(scope, receive, send_guarded, 403, "Sign in first.")
            return
        form: FormData | None = None
        if method == "POST" and self._refused_while_full(path):
            refusal = render(request, "error.html", status=503, code="ServerBusy", detail=VOLUME_FULL_MESSAGE)
            await refusal(scope, receive, send_guarded)
            return
        if method == "POST":
            upload = session.signed_in and path.endswith(UPLOAD_SUFFIX)
            request = Request(scope, paced(receive, self.body_timeout))
            problem = self._check_post(request, self.max_upload if upload else self.max_body)
            if problem is None:
                try:
                    form = await request.form(max_files=1 if upload else 0, max_fields=MAX_FORM_FIELDS)
                except ServiceError:  # paced: the client paused or trickled past the time allowed
                    problem = (408, "The form arrived too slowly.")
                except Exception:  # a malformed body: starlette raises its own parse errors
                    problem = (400, "The form could not be read.")
                else:
                    if not self.sessions.check_csrf(session, _text(form.get("csrf"))):
                        problem = (403, "This form has expired or did not come from this console: reload.")
                    state["form"] = form
            if problem is not None:
                if form is not None:
                    await form.close()
                await self._refuse(scope, receive, send_guarded, *problem)
                return
        try:
            await self.app(scope, receive, send_guarded)
        finally:
            if form is not None:
                await form.close()  # an uploaded file's temporary copy

    def _refused_while_full(self, path: str) -> bool:
        """A POST that writes, while the volume is full (looked at again, as the front-ends do,
        so the first write after room came back runs)."""
        volume = self.volume
        if volume is None or not volume.full or path in _NO_STORE_WRITES:
            return False
        inner = path[len(CONSOLE_PATH) :]
        if any(pattern.match(inner) for pattern in self.frees_space):
            return False
        return volume.still_full()

    @staticmethod
    def _check_post(request: Request, max_body: int) -> tuple[int, str] | None:
        origin = request.headers.get("origin")
        if origin is not None:
            expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if origin != expected:
                return 403, "This form did not come from this console."
        length = request.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > max_body:
            return 413, "The form is too large (or its length is not given)."
        return None

    def _cookie(self, session: Session, secure: bool) -> bytes:
        value = self.sessions.encode(session)
        attributes = (
            f"{COOKIE}={value}; Path={CONSOLE_PATH}; HttpOnly; SameSite=Strict;"
            f" Max-Age={self.sessions.max_age}"
        )
        return (attributes + ("; Secure" if secure else "")).encode("ascii")

    @staticmethod
    async def _refuse(scope: dict[str, Any], receive: Any, send: Any, status: int, message: str) -> None:
        page = ENV.get_template("refused.html").render(status=status, message=message)
        await html_page(page, status)(scope, receive, send)


def paced(receive: Any, timeout: float) -> Any:
    """``receive`` held to :func:`~tabulae.http.exchange.receive_paced`'s pace: a form's body may
    pause ``timeout`` seconds at most, and must then keep up Azure's minimum rate (else
    ``ServiceError("OperationTimedOut")``)."""
    started: float | None = None
    received = 0

    async def next_message() -> Any:
        nonlocal started, received
        if started is None:
            started = asyncio.get_running_loop().time()
        message = await receive_paced(receive, started, received, timeout)
        received += len(message.get("body", b""))
        return message

    return next_message


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def _service_error(request: Request, exc: Exception) -> Response:
    """A service error no page handled: its code and message, with the status Azure gives it."""
    assert isinstance(exc, ServiceError)
    # ``detail``, not ``message``: the base template shows a ``message`` as a note that all went well
    return render(request, "error.html", status=exc.status, code=exc.code, detail=exc.message)


async def _not_found(request: Request, exc: Exception) -> Response:
    if getattr(request.state, "session", None) is None:
        return PlainTextResponse("Not found", status_code=404)
    return render(request, "error.html", status=404, code="NotFound", detail="No such console page.")


def build_console(
    pages: Sequence[ConsolePage],
    *,
    accounts: dict[str, list[bytes]],
    secret: bytes,
    max_body: int,
    prefill: tuple[str, str] | None = None,
    hosts: Collection[str] = (),
    state_dir: str | None = None,
    volume: Volume | None = None,
    body_timeout: float = BODY_TIMEOUT,
) -> ConsoleGuard:
    """The console over ``pages`` (in navigation order), behind :class:`ConsoleGuard`; ``hosts``
    are the names it answers at besides loopback ones, ``state_dir`` is where the worker
    processes share the signed-out sessions (:mod:`.revocations`), ``volume`` the data volume
    whose full state refuses writes, ``body_timeout`` the pause a form's body may take."""
    sessions = Sessions(secret, accounts, revocations=Revocations(state_dir))
    signin = SignIn(sessions, pages[0].slug if pages else "", prefill)
    routes: list[BaseRoute] = [*signin.routes()]
    for page in pages:
        routes.extend(page.routes())
    frees_space = [
        route.path_regex
        for route in routes
        if isinstance(route, Route) and "POST" in (route.methods or ()) and route.name.startswith(FREES_SPACE)
    ]
    static = StaticFiles(directory=str(files("tabulae.console") / "static"))
    routes.append(Mount("/static", app=static, name="static"))
    app = Starlette(
        routes=[Mount(CONSOLE_PATH, routes=routes)],
        exception_handlers={ServiceError: _service_error, 404: _not_found},
    )
    nav = [(page.slug, page.title) for page in pages]
    return ConsoleGuard(
        app,
        sessions,
        nav,
        max_body,
        body_timeout=body_timeout,
        hosts=hosts,
        volume=volume,
        frees_space=frees_space,
    )
