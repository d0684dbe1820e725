"""The history of a container's blobs on the blobs page: every version and every soft-deleted
blob, snapshot or version (List Blobs with ``include=versions,deleted``), with the two ways back
Azure offers: Undelete Blob, and promoting a previous version by copying it over the blob (Copy
Blob with the version as its source, which makes a new current version and keeps every other).

It is part of the blobs page (:class:`~tabulae.console.blobs.BlobsPage`): its routes sit under
the container's, its writes are forms posted with the session's CSRF token through the console's
door and admitted by the same gate as a Blob request, and names and version ids travel in query
strings and form fields only.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tabulae.blob import versioning
from tabulae.blob.rules.conditions import NONE
from tabulae.blob.service import BASE, BlobKey, BlobRecord
from tabulae.console.render import account_of, form_of, redirect, render
from tabulae.model import edm
from tabulae.model.errors import ServiceError

if TYPE_CHECKING:
    from tabulae.console.blobs import BlobsPage

PAGE = 1000
DONE = {
    "undeleted": "Undeleted {name}.",
    "promoted": "Promoted a version of {name}: it is the current version now.",
}


def routes(page: BlobsPage) -> list[BaseRoute]:
    history = History(page)
    return [
        Route("/blobs/{container}/history", history.show, methods=["GET"]),
        Route("/blobs/{container}/undelete", history.undelete, methods=["POST"]),
        Route("/blobs/{container}/promote", history.promote, methods=["POST"]),
    ]


def _state(record: BlobRecord) -> str:
    if record.deleted_time is not None:
        return "deleted"
    if versioning.is_version(record.snapshot):
        return "version"
    if record.snapshot == BASE:
        return "current"
    return "snapshot"


class History:
    """The history view and its two actions (see the module's docstring)."""

    def __init__(self, page: BlobsPage) -> None:
        self.page = page

    async def show(self, request: Request, error: ServiceError | None = None) -> Response:
        account, container = account_of(request), request.path_params["container"]
        params = request.query_params
        prefix = params.get("prefix", "")
        marker = params.get("marker") or None
        service = self.page.service
        await self.page._admitted(account, container, service.get_container(account, container))
        listing = await self.page._admitted(
            account,
            container,
            service.list_blobs(
                account, container, prefix=prefix, delimiter=None, marker=marker, limit=PAGE,
                snapshots=True, uncommitted=False, versions=True, deleted=True,
            ),
        )  # fmt: skip
        rows: list[dict[str, Any]] = []
        for item in listing.items:
            assert not isinstance(item, str)  # no delimiter, no prefixes
            state = _state(item)
            rows.append(
                {
                    "name": item.name,
                    "state": state,
                    "version": versioning.version_id(item) or "",
                    "snapshot": item.snapshot if state == "snapshot" else "",
                    "size": item.size,
                    "modified": _moment(item.ticks),
                    "deleted": _epoch(item.deleted_time) if item.deleted_time is not None else "",
                    "promote": state == "version",
                }
            )
        done = params.get("done")
        return render(
            request,
            "history.html",
            status=error.status if error else 200,
            container=container,
            prefix=prefix,
            rows=rows,
            next_marker=listing.next_marker,
            paged=marker is not None,
            message=DONE[done].format(name=params.get("name", "")) if done in DONE else None,
            error=error,
        )

    async def undelete(self, request: Request) -> Response:
        """Undelete Blob: the blob's soft-deleted snapshots and versions, and its base."""
        account, container = account_of(request), request.path_params["container"]
        form = form_of(request)
        name, prefix = str(form.get("name", "")), str(form.get("prefix", ""))
        key = BlobKey(account, container, name)
        try:
            await self.page._admitted(account, container, self.page.service.undelete_blob(key))
        except ServiceError as error:
            return await self.show(request, error)
        return redirect(f"/blobs/{container}/history", prefix=prefix, done="undeleted", name=name)

    async def promote(self, request: Request) -> Response:
        """Copy a previous version over the blob: the copy is the new current version."""
        account, container = account_of(request), request.path_params["container"]
        form = form_of(request)
        name, prefix = str(form.get("name", "")), str(form.get("prefix", ""))
        version = str(form.get("version", ""))
        key = BlobKey(account, container, name)
        try:
            source_url = f"/{account}/{container}/{quote(name)}?versionid={quote(version)}"
            await self.page._admitted(
                account,
                container,
                self.page.service.copy_blob(
                    key, versioning.key_of(version), key, source_url, None, NONE, NONE, None
                ),
            )
        except ServiceError as error:
            return await self.show(request, error)
        return redirect(f"/blobs/{container}/history", prefix=prefix, done="promoted", name=name)


def _epoch(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + "Z"


def _moment(ticks: int) -> str:
    return _epoch((ticks - edm.UNIX_EPOCH_TICKS) / edm.TICKS_PER_SECOND)
