"""The blobs page: containers, and a container's blobs by virtual directory (upload, download, delete).

Blob names are paths only by convention: a listing with the delimiter ``/`` shows the names under
the current prefix one level deep, and the rest as *virtual directories* (the common prefixes
Azure's List Blobs returns), so a container of a million blobs is walked a directory at a time.
Both listings page with the service's own continuation markers, :data:`PAGE` items a page.

Every action is a call to :class:`BlobService` as the signed-in account, admitted first by the
same admission gate as a Blob request (the account's target, injected faults) and counted in
the container counters after. Names travel in query strings and form fields, never in paths,
so any blob name (``../``, ``?``, ``#``, markup) reaches the service exactly as typed; the page
shows it escaped.

A download is always an attachment of type ``application/octet-stream``: served inline from the
console's origin, an uploaded HTML or script file could run with the console's rights.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar
from urllib.parse import quote

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from tabulae.admission.blobs import BlobTicket
from tabulae.admission.gate import Gate
from tabulae.blob.rules.conditions import NONE, etag_of
from tabulae.blob.service import BASE as CURRENT_VERSION
from tabulae.blob.service import BLOCK_BLOB, BlobKey, BlobRecord, BlobService, ContentProperties, Upload
from tabulae.console import blob_history
from tabulae.console.render import account_of, form_of, redirect, render
from tabulae.insight.containers import ContainerCounters
from tabulae.model import edm
from tabulae.model.errors import ServiceError

PAGE = 1000  # containers or blobs (and virtual directories) a page
TREE_SCAN = 5000  # paths an HNS file system's tree is built from
DELIMITER = "/"
CHUNK = 1024 * 1024  # how much of an uploaded file is read at a time
DONE = {
    "created": "Container {name} created.",
    "deleted": "Container {name} deleted.",
    "uploaded": "Uploaded {name}.",
    "removed": "Deleted {name}.",
}
T = TypeVar("T")


def _moment(ticks: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((ticks - edm.UNIX_EPOCH_TICKS) / 1e7)) + "Z"


def _size(size: int) -> str:
    """Bytes as a person reads them (exact below 1 KiB)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def is_folder(record: BlobRecord) -> bool:
    """A directory of an HNS account, as the Blob API shows one (``hdi_isfolder=true``)."""
    return any(k.lower() == "hdi_isfolder" and v.lower() == "true" for k, v in record.metadata.items())


def permissions_text(posix: dict[str, Any]) -> str:
    """``rwxr-x---`` from a path's stored ACL text (owner entry, then the mask when there is one
    or else the owning group, then other; ``+`` for an extended ACL; ``t``/``T`` for the sticky
    bit); a directory made without one shows the defaults Azure gives it."""
    text = str(posix.get("a") or "user::rwx,group::r-x,other::---")
    base: dict[str, str] = {}
    extended = False
    for entry in text.split(","):
        if entry.startswith("default:"):
            continue
        kind, qualifier, perms = [*entry.split(":"), "", ""][:3]
        extended = extended or bool(qualifier) or kind == "mask"
        if not qualifier:
            base[kind] = perms
    group = base.get("mask", base.get("group", "---"))
    other = base.get("other", "---")
    if posix.get("s"):
        other = other[:2] + ("t" if other.endswith("x") else "T")
    return base.get("user", "---") + group + other + ("+" if extended else "")


def _node(label: str, prefix: str, posix: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": label,
        "prefix": prefix,
        "owner": str(posix.get("o") or "$superuser"),
        "group": str(posix.get("g") or "$superuser"),
        "permissions": permissions_text(posix),
        "children": [],
    }


def crumbs(prefix: str) -> list[tuple[str, str]]:
    """The virtual directories leading to ``prefix``: (label, prefix) pairs, outermost first."""
    found: list[tuple[str, str]] = []
    at = 0
    while (end := prefix.find(DELIMITER, at)) >= 0:
        found.append((prefix[at:end] or "(empty)", prefix[: end + 1]))
        at = end + 1
    return found


def attachment(name: str) -> str:
    """``Content-Disposition`` for a download of blob ``name``: its last path segment as the file
    name, plain ASCII for old clients and exact in ``filename*`` (RFC 6266)."""
    leaf = name.rsplit(DELIMITER, 1)[-1] or "blob"
    plain = "".join(c if c.isascii() and (c.isalnum() or c in "._-+ ") else "_" for c in leaf)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(leaf, safe='')}"


async def _chunks(file: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await file.read(CHUNK):
        yield chunk


class BlobsPage:
    """Containers and blobs of the signed-in account (see the module docstring)."""

    slug = "blobs"
    title = "Blobs"

    def __init__(self, service: BlobService, gate: Gate, counters: ContainerCounters) -> None:
        self.service = service
        self.gate = gate
        self.counters = counters

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/blobs", self.list_containers, methods=["GET"]),
            Route("/blobs", self.create_container, methods=["POST"]),
            Route("/blobs/{container}", self.list_blobs, methods=["GET"]),
            Route("/blobs/{container}/download", self.download, methods=["GET"]),
            Route("/blobs/{container}/upload", self.upload, methods=["POST"]),
            Route("/blobs/{container}/remove", self.remove_blob, methods=["POST"]),
            Route("/blobs/{container}/delete", self.delete_container, methods=["POST"]),
            *blob_history.routes(self),
        ]

    async def _admitted(
        self, account: str, container: str, work: Coroutine[Any, Any, T], *, bytes_in: int = 0
    ) -> T:
        """``work`` as a Blob request would run it, through the same gate: admitted first,
        counted after."""
        ticket = BlobTicket(self.counters, account, container)
        result = await self.gate.run(ticket, work)
        ticket.answered(200, bytes_in=bytes_in)
        return result

    # ------------------------------------------------------------------ containers

    async def list_containers(self, request: Request, error: ServiceError | None = None) -> Response:
        account = account_of(request)
        params = request.query_params
        prefix = params.get("prefix", "").strip()
        marker = params.get("marker") or None
        found, next_marker = await self._admitted(
            account, "", self.service.list_containers(account, prefix, marker, PAGE)
        )
        done = params.get("done")
        return render(
            request,
            "containers.html",
            status=error.status if error else 200,
            containers=[
                {"name": c.name, "modified": _moment(c.ticks), "access": c.public_access or "private"}
                for c in found
            ],
            prefix=prefix,
            next_marker=next_marker,
            paged=marker is not None,
            message=DONE[done].format(name=params.get("name", ""))
            if done in ("created", "deleted")
            else None,
            error=error,
        )

    async def create_container(self, request: Request) -> Response:
        account = account_of(request)
        name = str(form_of(request).get("name", "")).strip()
        try:
            await self._admitted(account, name, self.service.create_container(account, name, {}, None))
        except ServiceError as error:
            return await self.list_containers(request, error)
        return redirect("/blobs", done="created", name=name)

    async def delete_container(self, request: Request) -> Response:
        account, container = account_of(request), request.path_params["container"]
        if str(form_of(request).get("confirm", "")) != container:
            problem = ServiceError(
                "InvalidInput", f"Type the container's name, {container}, to confirm deleting it."
            )
            return await self.list_blobs(request, problem)
        try:
            await self._admitted(
                account, container, self.service.delete_container(account, container, NONE, None)
            )
        except ServiceError as error:
            return await self.list_blobs(request, error)
        return redirect("/blobs", done="deleted", name=container)

    # ------------------------------------------------------------------ blobs

    async def list_blobs(self, request: Request, error: ServiceError | None = None) -> Response:
        account, container = account_of(request), request.path_params["container"]
        params = request.query_params
        prefix = params.get("prefix", "")
        flat = params.get("flat") == "1"
        marker = params.get("marker") or None
        record = await self._admitted(account, container, self.service.get_container(account, container))
        page = await self._admitted(
            account,
            container,
            self.service.list_blobs(
                account,
                container,
                prefix=prefix,
                delimiter=None if flat else DELIMITER,
                marker=marker,
                limit=PAGE,
                snapshots=False,
                uncommitted=False,
            ),
        )
        folders: list[dict[str, str]] = []
        blobs: list[dict[str, Any]] = []
        features = await self.service.features.get(account)
        for item in page.items:
            if isinstance(item, str):
                folders.append({"prefix": item, "label": item[len(prefix) :]})
            else:
                blobs.append(
                    {
                        "name": item.name,
                        "label": item.name[len(prefix) :],
                        "size": _size(item.size),
                        "bytes": item.size,
                        "type": item.blob_type + (" (sealed)" if item.sealed else ""),
                        "tier": self._tier(item, features.premium_page_blobs),
                        "tags": sorted(item.tags.items()),
                        "content_type": item.properties.content_type or "",
                        "modified": _moment(item.ticks),
                    }
                )
        hns = features.hns
        tree = await self._tree(account, container, record.posix) if hns else None
        done = params.get("done")
        return render(
            request,
            "container.html",
            tree=tree,
            status=error.status if error else 200,
            container=container,
            access=record.public_access or "private",
            metadata=record.metadata,
            lease=record.lease.state,
            prefix=prefix,
            crumbs=crumbs(prefix),
            rest=prefix[prefix.rfind(DELIMITER) + 1 :],
            flat=flat,
            folders=folders,
            blobs=blobs,
            next_marker=page.next_marker,
            paged=marker is not None,
            message=DONE[done].format(name=params.get("name", ""))
            if done in ("uploaded", "removed")
            else None,
            error=error,
        )

    async def _tree(self, account: str, container: str, root: dict[str, Any]) -> dict[str, Any]:
        """An HNS file system's directories as a tree, the root first, each with its owner, group
        and permissions; read from one flat listing of at most :data:`TREE_SCAN` paths (``more``
        says the tree was cut there)."""
        page = await self._admitted(
            account,
            container,
            self.service.list_blobs(
                account, container, prefix="", delimiter=None, marker=None, limit=TREE_SCAN,
                snapshots=False, uncommitted=False,
            ),
        )  # fmt: skip
        top = _node("/", "", root)
        nodes: dict[str, dict[str, Any]] = {"": top}
        for item in page.items:
            if isinstance(item, str) or not is_folder(item):
                continue
            parent, _, leaf = item.name.rpartition(DELIMITER)
            node = _node(leaf, item.name + DELIMITER, item.posix)
            nodes[item.name] = node
            nodes.get(parent, top)["children"].append(node)
        return {"root": top, "more": page.next_marker is not None, "count": len(nodes) - 1}

    def _tier(self, record: BlobRecord, premium_account: bool = False) -> str:
        """A blob's access tier as a person reads it (a block blob's, or a premium page blob's
        P4..P80): inferred, or rehydrating, said so."""
        view = self.service.tier_view(record, premium_account)
        if view is None:
            return ""
        if view.archive_status is not None:
            target = view.archive_status.rsplit("-", 1)[-1].capitalize()
            return f"{view.access_tier} (rehydrating to {target})"
        return view.access_tier + (" (inferred)" if view.inferred else "")

    async def upload(self, request: Request) -> Response:
        """A file from the form, as a block blob named by the form (default: the file's own name
        under the current virtual directory); an existing blob of that name is replaced."""
        account, container = account_of(request), request.path_params["container"]
        form = form_of(request)
        file = form.get("file")
        prefix = str(form.get("prefix", ""))
        if not isinstance(file, UploadFile) or not file.filename:
            return await self.list_blobs(request, ServiceError("InvalidInput", "Choose a file to upload."))
        name = str(form.get("name", "")).strip() or prefix + file.filename
        size = file.size or 0
        content_type = file.content_type or "application/octet-stream"
        key = BlobKey(account, container, name)
        await file.seek(0)
        upload = Upload(_chunks(file), size)
        try:
            await self._admitted(
                account,
                container,
                self.service.put_blob(
                    key, BLOCK_BLOB, upload, ContentProperties(content_type=content_type), {}, NONE, None
                ),
                bytes_in=size,
            )
        except ServiceError as error:
            return await self.list_blobs(request, error)
        return redirect(f"/blobs/{container}", prefix=prefix, done="uploaded", name=name)

    async def download(self, request: Request) -> Response:
        account, container = account_of(request), request.path_params["container"]
        name = request.query_params.get("name", "")
        key = BlobKey(account, container, name)
        ticket = BlobTicket(self.counters, account, container)
        work = self.service.get_blob(key, CURRENT_VERSION, NONE, None, content=True)
        record, extents = await self.gate.run(ticket, work)
        assert extents is not None
        ticket.answered(200, bytes_out=record.size)
        headers = {
            "content-disposition": attachment(name),
            "content-length": str(record.size),
            "etag": f'"{etag_of(record.ticks)}"',
        }
        return StreamingResponse(
            self.service.read(key, extents, 0, record.size),
            media_type="application/octet-stream",
            headers=headers,
        )

    async def remove_blob(self, request: Request) -> Response:
        """Delete a blob with its snapshots (the confirmation says so)."""
        account, container = account_of(request), request.path_params["container"]
        form = form_of(request)
        name, prefix = str(form.get("name", "")), str(form.get("prefix", ""))
        key = BlobKey(account, container, name)
        try:
            await self._admitted(
                account,
                container,
                self.service.delete_blob(key, CURRENT_VERSION, "include", NONE, None),
            )
        except ServiceError as error:
            return await self.list_blobs(request, error)
        return redirect(f"/blobs/{container}", prefix=prefix, done="removed", name=name)
