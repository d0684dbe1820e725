"""The name a request's ``Host`` header gives, and whether it is a loopback name.

A page of any web site can reach a server that listens on loopback only: the site's own name,
resolved anew to 127.0.0.1 (DNS rebinding), makes the page and the server one origin, so the
page may read what the server answers. Such a request still says the attacker's name in its
``Host`` header, which is what the doors that trust "this machine" (the console, ``/metrics``
left open on loopback) look at before they answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from tabulae.config import is_loopback


def host_name(header: str) -> str:
    """The name a ``Host`` header gives, as compared: no port, no brackets, no trailing dot,
    lower case (``[::1]:10002`` -> ``::1``)."""
    if header.startswith("["):
        end = header.find("]")
        rest = header[end + 1 :] if end > 0 else ""
        if end < 0 or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return ""  # ``[::1].example``: no address a browser would send, and not loopback
        name = header[1:end]
    else:
        name = header.rpartition(":")[0] if header.count(":") == 1 else header
    return name.rstrip(".").lower()


def is_loopback_name(name: str) -> bool:
    """``localhost``, a name under it (``devstoreaccount1.table.localhost``, as clients address an
    account by subdomain) or a loopback address (``127.x.x.x``, ``::1``): only this machine's own
    clients send such a ``Host``. Names under ``localhost`` are loopback by RFC 6761, and
    browsers resolve them so without asking DNS, so no attacker's page can carry one. The rule
    is the one bind addresses are judged by (:func:`tabulae.config.is_loopback`)."""
    return is_loopback(name)


def scope_host(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The compared name of an ASGI scope's ``Host`` header (``None`` without one)."""
    for name, value in headers:
        if name == b"host":
            return host_name(value.decode("latin-1"))
    return None
