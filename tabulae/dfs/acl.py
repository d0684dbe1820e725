"""POSIX access control of an HNS account: ACLs, permissions, umask, inheritance and the check.

Sources: "Access control lists (ACLs) in Azure Data Lake Storage" (entries, default ACLs, the
mask, the owning group, the sticky bit, how permissions are evaluated, the permissions table of
common operations) and "Path - Create" / "Path - Update" / "Path - Get Properties" (the
``x-ms-acl``, ``x-ms-permissions`` and ``x-ms-umask`` headers). Recordings of real Azure
(azure-sdk-assets, python storage-file-datalake: ``test_directory.pyTestDirectorytest_get_access_control``,
``...test_set_access_control_recursive``, ``test_file_system.pyTestFileSystemtest_list_paths``)
and the .NET SDK's live tests (``FileClientTests``: ``CreateAsync_PermissionAndUmask``,
``SetAccessControlAsync_Error``, ``SetPermissionsAsync_Error``) pin down the rest:

- A directory created without ``x-ms-permissions`` or ``x-ms-umask`` reads ``rwxr-x---`` (0777
  under the default umask 0027), and so does one created with ``x-ms-permissions: 0777`` alone:
  the default umask applies whenever the parent has no default ACL. 0777 under umask 0057 is
  ``rwx-w----``.
- Its ACL reads ``user::rwx,group::r-x,other::---``: base entries only, no mask, owner and group
  ``$superuser`` when created with Shared Key.
- A malformed ACL is 400 ``InvaldAccessControlList`` (Azure's spelling), a malformed permission
  400 ``InvalidPermission``.

An ACL here is a tuple of :class:`Entry` in Azure's order (user, named users, group, named
groups, mask, other; then the default entries in the same order). Assumed where the sources are
silent, and said so where it matters: a full ACL (Set) must have the three base entries and no
duplicates; qualifiers are case-sensitive and may not contain ``,`` or ``:``; no whitespace is
allowed; a file takes no default entries.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tabulae.model.errors import ServiceError
from tabulae.model.roles import Role

R, W, X = 4, 2, 1
RWX = 7
STICKY = 0o1000

SUPERUSER = "$superuser"
#: Azure's default permission for a new directory and file, and its default umask ("Path - Create").
DIRECTORY_MODE = 0o777
FILE_MODE = 0o666
DEFAULT_UMASK = 0o027


class Kind(enum.IntEnum):
    """Entry kinds in the order Azure lists them."""

    USER = 0
    GROUP = 1
    MASK = 2
    OTHER = 3


_KIND_NAMES = {"user": Kind.USER, "group": Kind.GROUP, "mask": Kind.MASK, "other": Kind.OTHER}
_NAMES = {kind: name for name, kind in _KIND_NAMES.items()}


@dataclass(frozen=True, slots=True, order=True)
class Entry:
    """One ACL entry. ``qualifier`` is empty for the owning user (``user::``), the owning group
    (``group::``), the mask and other; else the object ID (or UPN) of a named user or group."""

    default: bool
    kind: Kind
    named: bool  # sorts the owning entry before the named ones of its kind
    qualifier: str
    perms: int

    @staticmethod
    def of(kind: Kind, perms: int, qualifier: str = "", *, default: bool = False) -> Entry:
        return Entry(default, kind, bool(qualifier), qualifier, perms)

    @property
    def key(self) -> tuple[bool, Kind, str]:
        """What identifies an entry within an ACL (the perms aside)."""
        return (self.default, self.kind, self.qualifier)


def bad_acl() -> ServiceError:
    return ServiceError("InvaldAccessControlList")


def bad_permission() -> ServiceError:
    return ServiceError("InvalidPermission")


# --- permissions triples -----------------------------------------------------------------------


def render_triple(perms: int) -> str:
    return ("r" if perms & R else "-") + ("w" if perms & W else "-") + ("x" if perms & X else "-")


def _parse_triple(text: str) -> int | None:
    if len(text) != 3:
        return None
    perms = 0
    for char, (letter, bit) in zip(text, (("r", R), ("w", W), ("x", X)), strict=True):
        if char == letter:
            perms |= bit
        elif char != "-":
            return None
    return perms


# --- ACL text ----------------------------------------------------------------------------------

_QUALIFIER = re.compile(r"[^,:\s]+")


def _parse_entry(text: str, *, with_perms: bool) -> Entry:
    parts = text.split(":")
    default = parts[0] == "default"
    if default:
        parts = parts[1:]
    kind = _KIND_NAMES.get(parts[0]) if parts else None
    if kind is None:
        raise bad_acl()
    # user:QUALIFIER:perms, group:..., mask::perms, other::perms; removal drops the perms (and
    # ``mask``/``other`` may then stand alone)
    expected = 3 if with_perms else 2
    # (and so may ``default:user`` and ``default:group``: the SDK's live tests remove them so)
    if not with_perms and len(parts) == 1:
        parts = [parts[0], ""]
    if len(parts) != expected:
        raise bad_acl()
    qualifier = parts[1]
    if qualifier and (kind in (Kind.MASK, Kind.OTHER) or not _QUALIFIER.fullmatch(qualifier)):
        raise bad_acl()
    perms = 0
    if with_perms:
        parsed = _parse_triple(parts[2])
        if parsed is None:
            raise bad_acl()
        perms = parsed
    return Entry.of(kind, perms, qualifier, default=default)


def parse_acl(text: str, *, full: bool = True, directory: bool = True) -> tuple[Entry, ...]:
    """``x-ms-acl`` of Set Access Control (``full``: it replaces the ACL, so the base entries
    ``user::``, ``group::`` and ``other::`` must be there) or of a modify (``full=False``: the
    entries to merge). Entries are ``[default:]user|group:[qualifier]:rwx``,
    ``[default:]mask::rwx`` and ``[default:]other::rwx``, comma-separated; a duplicate entry, or
    a default entry on a file, is 400 ``InvaldAccessControlList``. Returned in Azure's order."""
    if not text:
        raise bad_acl()
    entries = [_parse_entry(piece, with_perms=True) for piece in text.split(",")]
    keys = [entry.key for entry in entries]
    if len(set(keys)) != len(keys):
        raise bad_acl()
    if not directory and any(entry.default for entry in entries):
        raise bad_acl()
    if full:
        have = set(keys)
        for kind in (Kind.USER, Kind.GROUP, Kind.OTHER):
            if (False, kind, "") not in have:
                raise bad_acl()
    return tuple(sorted(entries))


def parse_removal(text: str) -> tuple[tuple[bool, Kind, str], ...]:
    """``x-ms-acl`` of a recursive ``mode=remove``: entries without permissions
    (``user:oid``, ``default:group:gid``, ``mask``, ``default:mask``). The base access entries
    cannot be removed (400 ``InvaldAccessControlList``, assumed)."""
    if not text:
        raise bad_acl()
    keys: list[tuple[bool, Kind, str]] = []
    for piece in text.split(","):
        entry = _parse_entry(piece, with_perms=False)
        if not entry.default and entry.kind is not Kind.MASK and not entry.qualifier:
            raise bad_acl()
        keys.append(entry.key)
    return tuple(keys)


def render_acl(entries: Iterable[Entry]) -> str:
    """Azure's text of an ACL, entries in its order."""
    return ",".join(
        f"{'default:' if entry.default else ''}{_NAMES[entry.kind]}:{entry.qualifier}:"
        + render_triple(entry.perms)
        for entry in sorted(entries)
    )


def access_entries(acl: Iterable[Entry]) -> tuple[Entry, ...]:
    return tuple(entry for entry in acl if not entry.default)


def default_entries(acl: Iterable[Entry]) -> tuple[Entry, ...]:
    return tuple(entry for entry in acl if entry.default)


def is_extended(acl: Iterable[Entry]) -> bool:
    """Whether the access ACL has more than the three base entries (the ``+`` of permissions)."""
    return any(not entry.default and (entry.qualifier or entry.kind is Kind.MASK) for entry in acl)


def _calculate_mask(entries: Sequence[Entry], default: bool) -> Entry | None:
    """POSIX: an ACL with named entries needs a mask; when none is given it is the union of the
    group class (named users, owning group, named groups)."""
    scoped = [entry for entry in entries if entry.default is default]
    if any(entry.kind is Kind.MASK for entry in scoped) or not any(entry.qualifier for entry in scoped):
        return None
    if not scoped:
        return None
    union = 0
    for entry in scoped:
        if entry.qualifier or entry.kind is Kind.GROUP:
            union |= entry.perms
    return Entry.of(Kind.MASK, union, default=default)


def complete(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """An ACL as stored: a default ACL's missing base entries copied from the access ACL (as HDFS
    does; assumed for Azure), and a mask added to a scope with named entries and none given."""
    result = list(entries)
    if any(entry.default for entry in result):
        have = {entry.key for entry in result}
        for entry in list(result):
            base = not entry.default and not entry.qualifier and entry.kind is not Kind.MASK
            if base and (True, entry.kind, "") not in have:
                result.append(replace(entry, default=True))
    for default in (False, True):
        mask = _calculate_mask(result, default)
        if mask is not None:
            result.append(mask)
    return tuple(sorted(result))


def modify(
    current: Sequence[Entry], changes: Sequence[Entry], *, directory: bool = True
) -> tuple[Entry, ...]:
    """Merge ``changes`` into ``current`` (``mode=modify``): each change replaces the entry with
    its key or is added. Default entries on a file are refused."""
    if not directory and any(entry.default for entry in changes):
        raise bad_acl()
    merged = {entry.key: entry for entry in current}
    for entry in changes:
        merged[entry.key] = entry
    return complete(list(merged.values()))


def remove(current: Sequence[Entry], keys: Iterable[tuple[bool, Kind, str]]) -> tuple[Entry, ...]:
    """Drop the entries named by ``keys`` (``mode=remove``); a removed default base entry takes
    the whole default ACL with it, as a default ACL cannot stand without them (assumed)."""
    doomed = set(keys)
    kept = [entry for entry in current if entry.key not in doomed]
    if any(key[0] and not key[2] and key[1] is not Kind.MASK for key in doomed):
        kept = [entry for entry in kept if not entry.default]
    return complete(kept)


# --- permissions strings -----------------------------------------------------------------------

_SYMBOLIC = re.compile(r"[r-][w-][x-][r-][w-][x-][r-][w-][xtT-]")
_OCTAL = re.compile(r"[01][0-7]{3}")


def parse_permissions(text: str) -> int:
    """``x-ms-permissions``: symbolic (``rwxr-x---``, the sticky bit as ``t`` over an execute bit
    for other or ``T`` without one) or 4-digit octal whose first digit is the sticky bit (0 or 1).
    Anything else, setuid/setgid included, is 400 ``InvalidPermission``."""
    if _OCTAL.fullmatch(text):
        return int(text, 8)
    if not _SYMBOLIC.fullmatch(text):
        raise bad_permission()
    mode = 0
    for index, char in enumerate(text):
        if char in "rwx":
            mode |= 1 << (8 - index)
    last = text[8]
    if last == "t":
        mode |= STICKY | X
    elif last == "T":
        mode |= STICKY
    return mode


def render_permissions(mode: int, *, extended: bool = False) -> str:
    """The ``x-ms-permissions`` (and List Paths ``permissions``) text of a mode: symbolic, with
    ``t``/``T`` for the sticky bit and a ``+`` when the ACL is extended (HDFS's spelling, which the
    SDKs' permission parsers accept; no recording of it was found)."""
    text = render_triple(mode >> 6 & RWX) + render_triple(mode >> 3 & RWX) + render_triple(mode & RWX)
    if mode & STICKY:
        text = text[:8] + ("t" if mode & X else "T")
    return text + ("+" if extended else "")


def parse_umask(text: str) -> int:
    """``x-ms-umask``: 4-digit octal ("Path - Create"); else 400 ``InvalidHeaderValue`` (assumed)."""
    if not re.fullmatch(r"[0-7]{4}", text):
        raise ServiceError("InvalidHeaderValue", fields=(("HeaderName", "x-ms-umask"), ("HeaderValue", text)))
    return int(text, 8)


# --- ACL <-> mode ------------------------------------------------------------------------------


def minimal_acl(mode: int) -> tuple[Entry, ...]:
    """The three base entries a mode stands for."""
    return (
        Entry.of(Kind.USER, mode >> 6 & RWX),
        Entry.of(Kind.GROUP, mode >> 3 & RWX),
        Entry.of(Kind.OTHER, mode & RWX),
    )


def mode_of(acl: Iterable[Entry], sticky: bool = False) -> int:
    """The permission bits an ACL shows: owner, the mask if there is one else the owning group
    (POSIX's group class), other."""
    by_key = {entry.key: entry.perms for entry in acl if not entry.default}
    group = by_key.get((False, Kind.MASK, ""), by_key.get((False, Kind.GROUP, ""), 0))
    mode = by_key.get((False, Kind.USER, ""), 0) << 6 | group << 3 | by_key.get((False, Kind.OTHER, ""), 0)
    return mode | (STICKY if sticky else 0)


def apply_mode(acl: Sequence[Entry], mode: int) -> tuple[Entry, ...]:
    """Set Access Control with ``x-ms-permissions``: the owner, group class (the mask when there
    is one, else the owning group) and other take the mode's bits; named entries and the default
    ACL stay."""
    has_mask = any(entry.key == (False, Kind.MASK, "") for entry in acl)
    result = []
    for entry in acl:
        if not entry.default and not entry.qualifier:
            if entry.kind is Kind.USER:
                entry = replace(entry, perms=mode >> 6 & RWX)
            elif entry.kind is Kind.OTHER:
                entry = replace(entry, perms=mode & RWX)
            elif (entry.kind is Kind.MASK) or (entry.kind is Kind.GROUP and not has_mask):
                entry = replace(entry, perms=mode >> 3 & RWX)
        result.append(entry)
    return tuple(sorted(result))


@dataclass(frozen=True, slots=True)
class NewPath:
    """What a new file or directory starts with."""

    acl: tuple[Entry, ...]
    sticky: bool

    @property
    def mode(self) -> int:
        return mode_of(self.acl, self.sticky)


def for_new_path(
    parent_acl: Sequence[Entry],
    *,
    directory: bool,
    permissions: int | None = None,
    umask: int | None = None,
    acl: Sequence[Entry] | None = None,
) -> NewPath:
    """The ACL of a path created under a directory whose ACL is ``parent_acl``.

    ``permissions`` (default 0777 for a directory, 0666 for a file) meets either the umask
    (default 0027) when the parent has no default ACL, or, when it has one, the parent's default
    ACL, which becomes the child's access ACL (owner, group class and other bits ANDed with the
    permissions) and, for a directory, its default ACL too; the umask is then not applied
    ("Path - Create": x-ms-umask; "Access control lists": default ACLs). An explicit ``acl``
    (``x-ms-acl`` on create) replaces the access (and default) entries it names."""
    mode = permissions if permissions is not None else (DIRECTORY_MODE if directory else FILE_MODE)
    sticky = bool(mode & STICKY)
    template = default_entries(parent_acl)
    if template:
        access = [replace(entry, default=False) for entry in template]
        access = list(apply_mode([*access], mode_of(access) & mode))
        new = access + ([*template] if directory else [])
    else:
        mask = umask if umask is not None else DEFAULT_UMASK
        new = list(minimal_acl(mode & ~mask & 0o777))
    if acl is not None:
        if not directory and any(entry.default for entry in acl):
            raise bad_acl()
        new = list(modify(new, acl, directory=directory))
    return NewPath(complete(new), sticky)


def new_owner_and_group(caller: str | None, parent_group: str | None) -> tuple[str, str]:
    """Owner and owning group of a new path ("Access control lists": the owning user is the
    caller, ``$superuser`` for Shared Key and SAS callers; the owning group is the parent
    directory's, and for a file system's root the caller, or ``$superuser``)."""
    owner = caller or SUPERUSER
    return owner, parent_group if parent_group is not None else owner


# --- the check ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Principal:
    """Who asks: the token's ``oid`` and the groups it belongs to, and the data role assigned to
    it (:mod:`tabulae.model.roles`); ``superuser`` for Shared Key, account SAS and service SAS
    callers, who have no ``oid``, and for a token with the Storage Blob Data Owner role (ACLs
    do not apply to either)."""

    oid: str = ""
    groups: frozenset[str] = frozenset()
    superuser: bool = False
    role: Role | None = None

    @property
    def creator(self) -> str | None:
        """Who owns what this caller creates: its ``oid``; None (``$superuser``) without one."""
        return self.oid or None


SUPER = Principal(superuser=True)


def allows(principal: Principal, wanted: int, owner: str, group: str, acl: Iterable[Entry]) -> bool:
    """Whether ``principal`` has every bit of ``wanted`` (R, W, X) on a path, as "Access control
    lists (ACLs) in Azure Data Lake Storage" evaluates it: superuser; else the owning user's
    entry (no mask); else a named user's entry under the mask; else the first owning or named
    group the caller belongs to whose entry, under the mask, grants it all; else other, under
    the mask (Azure's description applies the mask to other too, unlike POSIX)."""
    if principal.superuser:
        return True
    access: Mapping[tuple[bool, Kind, str], int] = {
        entry.key: entry.perms for entry in acl if not entry.default
    }
    mask = access.get((False, Kind.MASK, ""), RWX)
    if principal.oid and principal.oid == owner:
        return wanted & access.get((False, Kind.USER, ""), 0) == wanted
    named = access.get((False, Kind.USER, principal.oid))
    if named is not None and principal.oid:
        return wanted & named & mask == wanted
    for key, perms in sorted(access.items()):
        if key[1] is not Kind.GROUP:
            continue
        identity = key[2] or group
        if identity in principal.groups and wanted & perms & mask == wanted:
            return True
    return wanted & access.get((False, Kind.OTHER, ""), 0) & mask == wanted


def sticky_allows(principal: Principal, directory_owner: str, child_owner: str) -> bool:
    """In a directory with the sticky bit, only the child's owner, the directory's owner or a
    superuser may delete or rename a child ("Access control lists": the sticky bit)."""
    return principal.superuser or principal.oid in (directory_owner, child_owner)


def may_change_owner(principal: Principal) -> bool:
    """Only a superuser changes a path's owning user ("Access control lists": changing the
    owning user)."""
    return principal.superuser


def may_change_group(principal: Principal, owner: str, new_group: str) -> bool:
    """A superuser, or the owning user to a group they belong to ("changing the owning group")."""
    return principal.superuser or (principal.oid == owner and new_group in principal.groups)


class Need(enum.Enum):
    """The permissions an operation needs ("Access control lists": the table of common
    scenarios): X on every ancestor, then on the parent and on the path itself."""

    READ = (X, 0, R)
    APPEND = (X, 0, W)
    CREATE = (X, W | X, 0)
    DELETE = (X, W | X, 0)
    LIST = (X, 0, R | X)

    @property
    def ancestors(self) -> int:
        return self.value[0]

    @property
    def parent(self) -> int:
        return self.value[1]

    @property
    def target(self) -> int:
        return self.value[2]
