"""Access control lists enforced for bearer callers of an HNS account ("Access control model in
Azure Data Lake Storage", "Access control lists (ACLs) in Azure Data Lake Storage").

With ``--oauth basic`` a bearer token's ``oid`` (and its ``groups`` claim) is checked against the
owner, owning group and ACL of the path and of every directory above it, the root included, on
each DFS and Blob operation on a path: execute (``--x``) on every ancestor, then what the
operation needs of the parent and of the path itself, from the reference's table of common
scenarios (read: ``r--`` on the file; write or append: ``-w-``; create, delete and rename:
``-wx`` on the parent, and ``-w-`` on a file a create overwrites; list: ``r-x`` on the
directory). Only the owning user (or a superuser) sets permissions and ACLs, only a superuser
the owner, and the owner the group to one of its own groups. A directory with the sticky bit
lets only a child's owner or its own owner delete or rename the child. Shared Key and SAS callers
are superusers: ACLs never apply to them.

A token's data role (``--oauth-role``, :mod:`tabulae.model.roles`) is asked first, as Azure
evaluates role assignments before ACLs ("Access control model in Azure Data Lake Storage"): an
owner is a superuser; a contributor's data operations, and a reader's reads and listings, are
allowed without looking at an ACL; whatever the role does not cover (a reader's write, a
contributor's change of a path's access control) is decided by the ACLs as for a caller with no
role, so a contributor sets the ACL only of a path it owns and never its owner. Denied: 403
``AuthorizationPermissionMismatch``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tabulae.auth.bearer import token_claims
from tabulae.auth.flow import is_bearer
from tabulae.dfs import acl
from tabulae.dfs.acl import Principal, R, W, X
from tabulae.dfs.paths import ancestors, is_within, normalize, parent, parse_rename_source
from tabulae.dfs.routing import DfsOperation
from tabulae.dfs.service import DataLakeService, Posix, is_directory, posix_of, root_posix
from tabulae.model.blobs import BlobKey, BlobRecord
from tabulae.model.errors import ServiceError
from tabulae.model.roles import Role


def principal_of(headers: Mapping[str, str], roles: Mapping[str, Role] | None = None) -> Principal:
    """Who a verified request comes from: the bearer token's ``oid`` and ``groups`` with the
    highest role assigned to either (``roles``, by object ID); a superuser for Shared Key and
    SAS, and for a token with the owner role."""
    header = headers.get("authorization")
    if header is None or not is_bearer(header):
        return acl.SUPER
    claims = token_claims(header)
    groups = claims.get("groups")
    members = frozenset(str(group) for group in groups) if isinstance(groups, list) else frozenset()
    oid = str(claims.get("oid") or "")
    role = None
    if roles:
        held = [roles[name] for name in (oid, *members) if name in roles]
        role = max(held) if held else None
    return Principal(oid, members, superuser=role is Role.OWNER, role=role)


def denied() -> ServiceError:
    return ServiceError("AuthorizationPermissionMismatch")


@dataclass(frozen=True, slots=True)
class Need:
    """What an operation needs: of its parent directory (beyond execute) and of its path."""

    parent: int = 0
    target: int = 0
    sticky: bool = False  # deleting or renaming a child: the parent's sticky bit applies


_STEP = 1000  # paths read per page while checking a tree

TRAVERSE = Need()
READ = Need(target=R)
WRITE = Need(target=W)
LIST = Need(target=R | X)
CREATE = Need(parent=W | X)
DELETE = Need(parent=W | X, sticky=True)

# What a reader's role allows without an ACL: reading and listing ("Storage Blob Data Reader").
_READS = frozenset(
    {
        DfsOperation.READ, DfsOperation.GET_PROPERTIES, DfsOperation.GET_STATUS,
        DfsOperation.GET_ACCESS_CONTROL, DfsOperation.LIST_PATHS,
    }
)  # fmt: skip
# What a contributor's role does not cover: a path's access control ("Storage Blob Data
# Contributor" sets the ACL of what it owns, as any owning user may, and never the owner).
_ACCESS_CONTROL = frozenset({DfsOperation.SET_ACCESS_CONTROL, DfsOperation.SET_ACCESS_CONTROL_RECURSIVE})


def role_allows(role: Role | None, operation: DfsOperation) -> bool:
    """Whether a data role alone allows a DFS operation, before any ACL is read."""
    if role is None:
        return False
    if role is Role.READER:
        return operation in _READS
    return role is Role.OWNER or operation not in _ACCESS_CONTROL


_NEEDS: dict[DfsOperation, Need] = {
    DfsOperation.READ: READ,
    DfsOperation.GET_PROPERTIES: TRAVERSE,
    DfsOperation.GET_STATUS: TRAVERSE,
    DfsOperation.GET_ACCESS_CONTROL: TRAVERSE,
    DfsOperation.APPEND: WRITE,
    DfsOperation.CONCURRENT_APPEND: WRITE,
    DfsOperation.FLUSH: WRITE,
    DfsOperation.SET_PROPERTIES: WRITE,
    DfsOperation.SET_EXPIRY: WRITE,
    DfsOperation.LEASE: WRITE,
    DfsOperation.CREATE_FILE: CREATE,
    DfsOperation.CREATE_DIRECTORY: CREATE,
    DfsOperation.DELETE_PATH: DELETE,
}
# The DFS operations whose ACL check is :meth:`AccessGuard.authorize`'s (the rest, on file
# systems and deleted paths, only a role decides).
ACL_DECIDED = frozenset({*_NEEDS, DfsOperation.LIST_PATHS, DfsOperation.RENAME, *_ACCESS_CONTROL})


@dataclass(slots=True)
class Chain:
    """The directories from the root down to the path's parent that exist (``complete``: all
    of them), and the path's own record."""

    directories: list[Posix]
    complete: bool
    target: BlobRecord | None


class AccessGuard:
    """The checks, reading the records along a path through the DFS service."""

    def __init__(self, dfs: DataLakeService) -> None:
        self.dfs = dfs

    async def chain(self, key: BlobKey) -> Chain:
        directories = [root_posix(await self.dfs.root(key.account, key.container))]
        complete = True
        for name in ancestors(key.name):
            found = await self.dfs.store.get_blob(BlobKey(key.account, key.container, name))
            if found is None or not is_directory(found[0]):
                complete = False
                break
            directories.append(posix_of(found[0]))
        target = None
        if key.name and complete:
            found = await self.dfs.store.get_blob(key)
            target = found[0] if found is not None else None
        return Chain(directories, complete, target)

    async def check(self, principal: Principal, key: BlobKey, need: Need) -> Chain:
        """Execute on every directory above ``key``, then ``need`` of its parent (the deepest
        directory that exists, for a create that makes parents) and of the path; 403 otherwise."""
        chain = await self.chain(key)
        *above, last = chain.directories
        for posix in above:
            _require(principal, posix, X)
        if not key.name:  # the root itself
            _require(principal, last, need.target | X if need.target else X)
            return chain
        _require(principal, last, X | need.parent)
        child = chain.target
        sticky = need.sticky and chain.complete and last.sticky and child is not None
        if (
            sticky
            and child is not None
            and not acl.sticky_allows(principal, last.owner, posix_of(child).owner)
        ):
            raise denied()
        if chain.target is not None and need.target:
            _require(principal, posix_of(chain.target), need.target)
        return chain

    async def authorize(
        self, principal: Principal, operation: DfsOperation, key: BlobKey, headers: Mapping[str, str],
        query: Mapping[str, str],
    ) -> None:  # fmt: skip
        """Check a DFS operation on ``key`` (a path, or the file system's root)."""
        if principal.superuser or role_allows(principal.role, operation):
            return
        need = _NEEDS.get(operation)
        if need is not None:
            chain = await self.check(principal, key, need)
            if operation is DfsOperation.CREATE_FILE and chain.target is not None:
                _require(principal, posix_of(chain.target), W)  # an overwrite writes the file
            elif (
                operation is DfsOperation.DELETE_PATH
                and chain.target is not None
                and is_directory(chain.target)
                and query.get("recursive", "").lower() == "true"
            ):
                await self.check_tree(principal, key, chain.target)
            return
        if operation is DfsOperation.LIST_PATHS:
            directory = normalize(query.get("directory", ""))
            await self.check(principal, BlobKey(key.account, key.container, directory), LIST)
        elif operation is DfsOperation.RENAME:
            source = parse_rename_source(headers["x-ms-rename-source"])
            await self.check(principal, BlobKey(key.account, source.filesystem, source.path), DELETE)
            await self.check(principal, key, CREATE)
        elif operation in _ACCESS_CONTROL:
            # a contributor's role lets it reach the path; the owner rules below still apply
            contributes = principal.role is Role.CONTRIBUTOR
            chain = await (self.chain(key) if contributes else self.check(principal, key, TRAVERSE))
            owner = _owner(chain, key)
            if owner is None:
                return  # a missing path: the operation says 404
            if "x-ms-owner" in headers and headers["x-ms-owner"] != owner:
                raise denied()
            group = headers.get("x-ms-group")
            if group is not None and not acl.may_change_group(principal, owner, group):
                raise denied()
            if principal.oid != owner:
                raise denied()

    async def check_tree(self, principal: Principal, key: BlobKey, directory: BlobRecord) -> None:
        """A recursive delete of the directory ``key`` empties every directory of its tree, so
        it needs ``rwx`` on each one that has children, the directory itself included (POSIX's
        ``rm -r``, and HDFS's check of every subdirectory, which Azure's "recursive ACL checks as
        a POSIX requirement" of Delete Path's ``paginated`` names); else 403 and nothing goes.
        An empty directory is removed by the write on its parent alone."""
        directories = {key.name: directory}
        checked: set[str] = set()
        after: str | None = None
        while True:
            records, after = await self.dfs.list_paths(
                key.account, key.container, key.name, True, after, _STEP
            )
            for record in records:
                if is_directory(record):
                    directories[record.name] = record
                above = parent(record.name)
                if above in checked:
                    continue
                found = directories.get(above)
                if found is None:  # a parent listed on an earlier page
                    found = await self._record(BlobKey(key.account, key.container, above))
                if found is not None:
                    _require(principal, posix_of(found), R | W | X)
                checked.add(above)
            if after is None:
                return

    async def check_descent(self, principal: Principal, top: BlobKey, records: Sequence[BlobRecord]) -> None:
        """A recursive List Paths descends into each directory below ``top`` whose children
        it shows, and listing a directory needs ``r-x`` on it (the reference's table: "List
        directory"), as on every directory it lists alone; one it may not list makes the whole
        request 403 (assumed: Azure answers a listing whole, never with holes). ``top`` itself
        was checked before the listing; a caller whose role lets it list skips this."""
        if principal.superuser or principal.role is not None:
            return
        shown = {record.name: record for record in records}
        allowed = {top.name}
        for record in records:
            chain: list[str] = []
            directory = parent(record.name)
            while directory not in allowed and is_within(directory, top.name):
                chain.append(directory)
                directory = parent(directory)
            for name in reversed(chain):
                found = shown.get(name) or await self._record(BlobKey(top.account, top.container, name))
                if found is not None:
                    _require(principal, posix_of(found), R | X)
                allowed.add(name)

    async def _record(self, key: BlobKey) -> BlobRecord | None:
        found = await self.dfs.store.get_blob(key)
        return found[0] if found is not None else None

    async def authorize_list_blobs(
        self, principal: Principal, key: BlobKey, query: Mapping[str, str], limit: int
    ) -> None:
        """List Blobs on an HNS account lists the directory its prefix ends in (``a/b`` and
        ``a/`` list ``a``), which needs ``r-x`` on it and ``--x`` above, as List Paths of that
        directory does (the reference's table: "List directory"); without ``/`` as delimiter it
        lists the tree below as a recursive List Paths does, so each directory whose children
        the page shows needs ``r-x`` too (assumed, as for List Paths: the docs do not say what
        Azure does for List Blobs). A caller whose role lets it list is not asked."""
        if principal.superuser or role_allows(principal.role, DfsOperation.LIST_PATHS):
            return
        directory = normalize(query.get("prefix", "").rpartition("/")[0])
        top = BlobKey(key.account, key.container, directory)
        await self.check(principal, top, LIST)
        if query.get("delimiter") == "/":
            return
        page = await self.dfs.blobs.list_blobs(
            key.account, key.container, prefix=query.get("prefix", ""), delimiter=None,
            marker=query.get("marker") or None, limit=limit, snapshots=False, uncommitted=False,
            start_from=query.get("startFrom") or None, end_before=query.get("endBefore") or None,
        )  # fmt: skip
        records = [item for item in page.items if not isinstance(item, str)]
        await self.check_descent(principal, top, records)

    async def authorize_blob(self, principal: Principal, method: str, key: BlobKey, comp: str | None) -> None:
        """The same rules for the Blob API's operations on a path of an HNS account: a read
        reads the file, Get Properties traverses, a write of content creates or overwrites, any
        other write (metadata, properties, lease, blocks) writes the blob, a delete deletes."""
        if principal.superuser or not key.name or principal.role is Role.CONTRIBUTOR:
            return
        if principal.role is Role.READER and method in ("GET", "HEAD"):
            return
        if method == "GET":
            await self.check(principal, key, READ)
        elif method == "HEAD":
            await self.check(principal, key, TRAVERSE)
        elif method == "DELETE":
            await self.check(principal, key, DELETE)
        elif method == "PUT" and comp in (None, "blocklist"):
            chain = await self.check(principal, key, CREATE)
            if chain.target is not None:
                _require(principal, posix_of(chain.target), W)
        elif method == "PUT":
            await self.check(principal, key, WRITE)


def _owner(chain: Chain, key: BlobKey) -> str | None:
    if not key.name:
        return chain.directories[0].owner
    return posix_of(chain.target).owner if chain.target is not None else None


def _require(principal: Principal, posix: Posix, wanted: int) -> None:
    if not acl.allows(principal, wanted, posix.owner, posix.group, posix.entries):
        raise denied()
