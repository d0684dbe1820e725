"""How every ``tabulae`` command reports a failure: one line ``tabulae: CODE: message`` on standard
error and a non-zero exit status, never a Python traceback.

``CODE`` is Azure's error code where a service answered (``InvalidResourceName``,
``TableAlreadyExists``), else a short code of ours naming what went wrong on this side:
``InvalidArguments``, ``InvalidConnectionString``, ``ConnectionRefused``, ``HostNotFound``,
``ConnectionTimedOut``, ``FileNotFound``… Commands raise :class:`Failure` for what they detect
themselves and let everything else propagate; :func:`describe` turns any exception into the line
and the status, in this one place. Exit statuses: 1 a refusal or a failure, 2 a usage error, 3 a
server that could not start or a copy whose count check failed, 130 an interrupt (said quietly).
"""

from __future__ import annotations

import errno
import json
import re
import socket
import ssl
from collections.abc import Iterator
from typing import Any

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

EXIT_FAILED, EXIT_USAGE, EXIT_START, EXIT_INTERRUPTED = 1, 2, 3, 130


class Failure(Exception):
    """A failure a command detected itself: its code, a one-line message (never a key), its
    exit status."""

    def __init__(self, code: str, message: str, status: int = EXIT_FAILED) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def line(failure: Failure) -> str:
    """The line printed for ``failure``: one line, whatever its message holds."""
    return f"tabulae: {failure.code}: {' '.join(failure.message.split())}"


def describe(exc: BaseException) -> Failure:
    """The failure ``exc`` means to a user: Azure's code where a service answered, else ours."""
    if isinstance(exc, Failure):
        return exc
    answered = _answer(exc)
    if isinstance(exc, HttpResponseError) and exc.response is not None:
        code, message = service_error(exc)
        return Failure(code, message)
    if answered is not None:
        # The SDK re-raises some answers as a ValueError of its own words (a table name it
        # then explains); the service's code stays the code, the SDK's words the message.
        code, message = service_error(answered)
        return Failure(code, _first_line(str(exc)) or message)
    if isinstance(exc, ClientAuthenticationError):
        return Failure("AuthenticationFailed", f"cannot sign the request: {_first_line(str(exc))}")
    if isinstance(exc, (ServiceRequestError, ServiceResponseError, ConnectionError, TimeoutError)):
        return Failure(connection_code(exc), connection_message(exc))
    if isinstance(exc, FileNotFoundError) and exc.filename is not None:
        return Failure("FileNotFound", f"{exc.filename}: no such file")
    if isinstance(exc, OSError) and exc.filename is not None:
        return Failure(_errno_code(exc), f"{exc.filename}: {exc.strerror or exc}")
    if isinstance(exc, OSError):
        return Failure(connection_code(exc), connection_message(exc))
    return Failure("UnexpectedError", f"{type(exc).__name__}: {_first_line(str(exc))}")


def service_error(exc: HttpResponseError) -> tuple[str, str]:
    """(Azure's error code, the first line of its message) of an answer, from the SDK's fields,
    the ``x-ms-error-code`` header or the error body (JSON or XML)."""
    response = exc.response
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # the SDK's codes are an enum of Azure's strings
    message = ""
    body = ""
    if response is not None:
        headers: Any = getattr(response, "headers", {})
        code = code or headers.get("x-ms-error-code")
        try:
            body = response.text()
        except Exception:  # a streamed or undecodable body: the header and status still tell
            body = ""
    if body:
        try:
            error = json.loads(body).get("odata.error") or {}
            code = code or error.get("code")
            message = (error.get("message") or {}).get("value", "")
        except (ValueError, AttributeError):
            found = re.search(r"<Message>([^<]*)</Message>", body)
            message = found.group(1) if found else ""
            found = re.search(r"<Code>([^<]*)</Code>", body)
            code = code or (found.group(1) if found else None)
    if not message:
        message = getattr(exc, "message", None) or str(exc)
    status = getattr(exc, "status_code", None)
    return str(code or f"Http{status}"), _first_line(str(message)) or f"HTTP status {status}"


def connection_code(exc: BaseException) -> str:
    """Our code for a request that got no answer: what the cause chain says happened."""
    for cause in _chain(exc):
        if isinstance(cause, socket.gaierror):
            return "HostNotFound"
        if isinstance(cause, ConnectionRefusedError):
            return "ConnectionRefused"
        if isinstance(cause, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return "ConnectionReset"
        if isinstance(cause, (TimeoutError, socket.timeout)):
            return "ConnectionTimedOut"
        if isinstance(cause, ssl.SSLError):
            return "TlsFailed"
    return "ConnectionFailed"


def connection_message(exc: BaseException) -> str:
    """Where and why, from the deepest cause that says it (the SDK's own text repeats a
    connection object's repr)."""
    where = ""
    found = re.search(r"host='([^']*)', port=(\d+)", str(exc))
    if found:
        where = f" {found.group(1)}:{found.group(2)}"
    reason = ""
    for cause in _chain(exc):
        if isinstance(cause, OSError) and cause.strerror:
            reason = cause.strerror
        elif isinstance(cause, socket.gaierror) and cause.args:
            reason = str(cause.args[-1])
    reason = reason or _first_line(str(exc))
    return f"cannot reach{where or ' the service'}: {reason}"


def _answer(exc: BaseException) -> HttpResponseError | None:
    for cause in _chain(exc):
        if isinstance(cause, HttpResponseError) and cause.response is not None:
            return cause
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes: ``__cause__``, ``__context__``, the SDK's ``inner_exception`` and
    urllib's ``reason`` (bounded: a chain can loop)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for name in ("inner_exception", "reason", "__cause__", "__context__"):
            nested = getattr(current, name, None)
            if isinstance(nested, BaseException):
                todo.append(nested)


def _errno_code(exc: OSError) -> str:
    return {
        errno.EACCES: "PermissionDenied",
        errno.EPERM: "PermissionDenied",
        errno.EISDIR: "IsADirectory",
        errno.ENOTDIR: "NotADirectory",
        errno.EEXIST: "FileExists",
        errno.ENOSPC: "NoSpaceLeft",
        errno.EROFS: "ReadOnlyFileSystem",
    }.get(exc.errno or 0, "FileError")


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()
