"""Rendering console pages: Jinja2 templates with escaping always on, and the few helpers pages share.

Everything a page shows is escaped by the template engine (``autoescape``), entity values and
keys included: they are user data, and ``<script>`` is a perfectly good PartitionKey. Lone
surrogates (legal in a key, not in UTF-8) are shown as U+FFFD; links carry keys in an exact
encoding of their own (:func:`key_token`), never as displayed text.

The U+FFFD substitution is made once, on the finished page (:func:`html_page`), and never on
the values the template engine is still assembling: there a plain ``str`` made from a macro's
output (which is markup, already escaped) would be escaped a second time, and a form whose
values were not ASCII came out as text instead of fields.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

CONSOLE_PATH = "/-/console"  # where the gateway mounts the console

_SURROGATE = re.compile("[\ud800-\udfff]")


def html_page(page: str, status: int = 200) -> HTMLResponse:
    """A rendered page as UTF-8; a lone surrogate (which UTF-8 cannot hold) becomes U+FFFD."""
    try:
        body = page.encode("utf-8")
    except UnicodeEncodeError:
        body = _SURROGATE.sub("\ufffd", page).encode("utf-8")
    return HTMLResponse(body, status_code=status)


def query_string(**params: Any) -> str:
    """``?a=1&b=2`` of the parameters that are set (``None`` and ``""`` left out)."""
    kept = {name: value for name, value in params.items() if value not in (None, "")}
    return "?" + urlencode(kept) if kept else ""


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> str:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw.decode("utf-8", "surrogatepass")


def key_token(pk: str, rk: str) -> str:
    """An entity's keys as one URL path segment, exact for every key (``k<pk>.<rk>``, base64url)."""
    return f"k{_b64(pk)}.{_b64(rk)}"


def keys_of(token: str) -> tuple[str, str] | None:
    """The keys a :func:`key_token` names, or ``None`` if it is not one."""
    if not token.startswith("k") or token.count(".") != 1:
        return None
    pk_text, rk_text = token[1:].split(".")
    try:
        return _unb64(pk_text), _unb64(rk_text)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


ENV = Environment(
    loader=PackageLoader("tabulae.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.globals.update(base=CONSOLE_PATH, qs=query_string, key_token=key_token)


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page: the template with the console-wide context (account, CSRF token, navigation)."""
    state = request.state
    page = ENV.get_template(template).render(
        account=state.session.account,
        csrf=state.csrf,
        nav=state.nav,
        current=getattr(state, "current", None),
        **context,
    )
    return html_page(page, status)


def redirect(path: str, **params: Any) -> RedirectResponse:
    """303 See Other to a console path (after a POST, so a reload never repeats it)."""
    return RedirectResponse(CONSOLE_PATH + path + query_string(**params), status_code=303)


def form_of(request: Request) -> FormData:
    """The submitted form, parsed (and its CSRF token checked) before the page's handler ran."""
    form = getattr(request.state, "form", None)
    return form if form is not None else FormData()


def account_of(request: Request) -> str:
    """The signed-in account: every service call a page makes is made as this account."""
    account: str = request.state.session.account
    assert account, "pages are reached only when signed in"
    return account
