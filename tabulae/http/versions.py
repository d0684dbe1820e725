"""``x-ms-version``: the storage service versions a request may name, for every service alike.

Azure checks the header in its common front-end, before any service sees the request: a value
it does not know, malformed (``invalid``) or a date it has not deployed (``3025-01-01``), is
refused with 400 ``InvalidHeaderValue`` naming the header and the value ("Versioning for the
Azure Storage services"). The list runs from 2009-09-19 to the newest version the current SDKs
send (azure-storage-blob and azure-storage-queue 12.x send 2026-10-06, their betas 2026-12-06,
which Azure's recordings of the blob SDK's tests show it answering; azure-data-tables sends
2019-02-02, its 12.8 betas 2025-07-05). A request without the header is served at
:data:`DEFAULT_VERSION`.
"""

from __future__ import annotations

from tabulae.model.errors import FrontEndRefusal

DEFAULT_VERSION = "2019-02-02"  # echoed as x-ms-version when a request names none

KNOWN_VERSIONS = frozenset(
    {
        "2009-09-19", "2011-08-18", "2012-02-12", "2013-08-15", "2014-02-14", "2015-02-21",
        "2015-04-05", "2015-07-08", "2015-12-11", "2016-05-31", "2017-04-17", "2017-07-29",
        "2017-11-09", "2018-03-28", "2018-11-09", "2019-02-02", "2019-07-07", "2019-10-10",
        "2019-12-12", "2020-02-10", "2020-04-08", "2020-06-12", "2020-08-04", "2020-10-02",
        "2020-12-06", "2021-02-12", "2021-04-10", "2021-06-08", "2021-08-06", "2021-10-04",
        "2021-12-02", "2022-11-02", "2023-01-03", "2023-05-03", "2023-08-03", "2023-11-03",
        "2024-02-04", "2024-05-04", "2024-08-04", "2024-11-04", "2025-01-05", "2025-05-05",
        "2025-07-05", "2025-11-05", "2026-02-06", "2026-04-06", "2026-06-06", "2026-10-06",
        "2026-12-06",
    }
)  # fmt: skip


class UnknownVersion(FrontEndRefusal):
    """400 ``InvalidHeaderValue`` for an ``x-ms-version`` the service does not know.

    A type of its own because Azure's common front-end, not the service, writes this answer, and
    a service that renders it as recorded tells it apart by type (the Blob service: no
    ``x-ms-error-code`` header, a line break after the XML declaration). The client's request id
    is echoed as ever (no version is, being unknown)."""

    __slots__ = ()
    echoes = True

    def __init__(self, value: str) -> None:
        super().__init__(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-version"), ("HeaderValue", value))
        )


def check_version(value: str | None) -> None:
    """Refuse an ``x-ms-version`` the service does not know; a missing header is fine.

    One set lookup on the header's text: the per-request cost of the check. The error carries
    ``HeaderName`` and ``HeaderValue``, the elements Azure's XML error body has for it; a front-end
    that answers in JSON (Table OData operations) renders only code and message.
    """
    if value is None or value in KNOWN_VERSIONS:
        return
    raise UnknownVersion(value)


def run_at_signed_version(headers: dict[str, str], signed: str | None) -> None:
    """Serve a request its SAS authorised, and that names no ``x-ms-version``, at the SAS's
    signed version (``sv``).

    "Versioning for Azure Storage": the optional version header of a SAS request says which
    version runs the operation, and only when it is absent does ``sv`` say it too. Azure's
    recording of @azure/storage-blob's "generateBlobSASQueryParameters should work for blob
    with previous API version" shows the header winning: Get Blob Properties through a token
    signed ``sv=2016-05-31``, sent with ``x-ms-version: 2026-06-06``, is answered at 2026-06-06,
    with the version-id headers 2016-05-31 did not have. (The older "Previous Azure Storage
    service versions" page says the header is ignored; the recording of real Azure says
    otherwise.) A SAS URL handed to a browser or ``curl`` (a token from ``az storage ...
    generate-sas``) names no version, and is served at its ``sv``, not at
    :data:`DEFAULT_VERSION`. Every version-dependent rule reads the header, so it is set here,
    once, after the SAS is verified. A token without ``sv`` (Blob SAS older than 2012-02-12) or
    with one this server does not know leaves the request as it came.
    """
    if "x-ms-version" not in headers and signed is not None and signed in KNOWN_VERSIONS:
        headers["x-ms-version"] = signed


def response_version(value: str | None) -> bytes | None:
    """The ``x-ms-version`` a response echoes: the request's when known, the default when it named
    none, nothing for an unknown one (Azure's 400 for it carries no version)."""
    return _ECHOED[DEFAULT_VERSION] if value is None else _ECHOED.get(value)


_ECHOED = {version: version.encode("ascii") for version in KNOWN_VERSIONS}  # encoded once
