"""A model of what Azure shows of one container on an account with blob versioning and blob
soft delete both on: the oracle for property tests of the real server.

It knows versions, soft delete, undelete and promotion, and a clock; nothing of HTTP or storage.
An integration test draws a sequence from ``operations()``, applies each operation to this model
and to a Tabulae server (``apply`` shows the mapping), and compares ``listing()`` with List
Blobs ``include=versions,deleted`` and each ``read`` with Get Blob.

Azure's behaviour modelled ("Blob versioning"; "Soft delete for blobs", the section on
versioning; "Undelete Blob"):

* every write (and a promotion: Copy Blob from ``?versionid=`` onto the base blob) makes a new
  version, which becomes current; the one it replaces becomes a previous version;
* Delete Blob leaves no current version and soft-deletes nothing: every version stays, listed
  with ``include=versions``; a read of the base blob is then 404 ``BlobNotFound``;
* Delete Blob with ``versionid`` of a previous version soft-deletes that version: it is listed
  only with ``include=deleted``, with ``RemainingRetentionDays``, and cannot be read;
* Undelete Blob restores every soft-deleted version of the blob still within retention; it does
  not make any version current (promotion does that);
* when a soft-deleted version's retention has passed it is gone for good.

Assumed, not seen in a recording: a missing or already soft-deleted version is 404
``BlobNotFound`` for delete, read and promotion alike; Undelete of a name with no version at
all is 404 ``BlobNotFound``; deleting the current version by its id is not modelled (the
operations never draw it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from tabulae.blob.rules import softdelete, versions

START = datetime(2026, 1, 1, tzinfo=UTC)


class ModelError(Exception):
    """The error Azure would answer: status and code."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"{status} {code}")
        self.status = status
        self.code = code


def _not_found() -> ModelError:
    return ModelError(404, "BlobNotFound")


@dataclass
class Version:
    content: bytes
    deletion: softdelete.Deletion | None = None


@dataclass
class BlobState:
    versions: dict[str, Version] = field(default_factory=dict)
    current: str | None = None


@dataclass(frozen=True, order=True)
class Listed:
    """One ``<Blob>`` of List Blobs ``include=versions,deleted``."""

    name: str
    version_id: str
    content: bytes
    is_current: bool
    deleted: bool
    remaining_days: int | None


class BlobModel:
    """Azure's visible state of one container; ``now`` moves only through ``advance``."""

    def __init__(self, retention_days: int = 7, now: datetime = START) -> None:
        self.retention_days = retention_days
        self.now = now
        self.blobs: dict[str, BlobState] = {}

    def _newest(self, state: BlobState) -> str | None:
        return max(state.versions, default=None)

    def write(self, name: str, content: bytes) -> str:
        """Put Blob: the new version's id (``x-ms-version-id``)."""
        state = self.blobs.setdefault(name, BlobState())
        vid = versions.new_version_id(self.now, self._newest(state))
        state.versions[vid] = Version(content)
        state.current = vid
        return vid

    def delete(self, name: str) -> None:
        """Delete Blob without a version id."""
        state = self.blobs.get(name)
        if state is None or state.current is None:
            raise _not_found()
        state.current = None

    def _live_version(self, name: str, vid: str) -> Version:
        state = self.blobs.get(name)
        version = None if state is None else state.versions.get(vid)
        if version is None or version.deletion is not None:
            raise _not_found()
        return version

    def delete_version(self, name: str, vid: str) -> None:
        """Delete Blob with ``versionid`` of a previous version: soft-deletes it."""
        version = self._live_version(name, vid)
        if self.blobs[name].current == vid:
            raise NotImplementedError("deleting the current version by id is not modelled")
        version.deletion = softdelete.Deletion(self.now, self.retention_days)

    def undelete(self, name: str) -> None:
        """Undelete Blob: every soft-deleted version of ``name`` comes back."""
        state = self.blobs.get(name)
        if state is None or not state.versions:
            raise _not_found()
        for version in state.versions.values():
            version.deletion = None

    def promote(self, name: str, vid: str) -> str:
        """Copy Blob from ``name?versionid=vid`` onto ``name``: the new current version's id."""
        return self.write(name, self._live_version(name, vid).content)

    def read(self, name: str, vid: str | None = None) -> bytes:
        """Get Blob of the current version, or of ``vid``."""
        if vid is not None:
            return self._live_version(name, vid).content
        state = self.blobs.get(name)
        if state is None or state.current is None:
            raise _not_found()
        return state.versions[state.current].content

    def set_retention(self, days: int) -> None:
        """Set Blob Service Properties with a new ``DeleteRetentionPolicy``: later deletes use it."""
        self.retention_days = days

    def advance(self, delta: timedelta) -> None:
        """Let time pass; soft-deleted versions past their retention are purged."""
        self.now += delta
        for name in list(self.blobs):
            state = self.blobs[name]
            for vid in [
                v for v, ver in state.versions.items() if ver.deletion and ver.deletion.purged(self.now)
            ]:
                del state.versions[vid]
            if not state.versions:
                del self.blobs[name]

    def listing(self) -> list[Listed]:
        """List Blobs ``include=versions,deleted``, in Azure's order (name, then version id)."""
        out = []
        for name, state in self.blobs.items():
            for vid, version in state.versions.items():
                d = version.deletion
                out.append(
                    Listed(
                        name,
                        vid,
                        version.content,
                        vid == state.current,
                        d is not None,
                        None if d is None else d.remaining_days(self.now),
                    )
                )
        return sorted(out)


# ------------------------------------------------------------------------ operations to draw

NAMES = ("a", "dir/b")


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` and its arguments. ``pick`` chooses among existing versions."""

    kind: str
    name: str = "a"
    content: bytes = b""
    pick: int = 0
    days: int = 1
    seconds: float = 0.0


def operations(min_size: int = 8, max_size: int = 40) -> st.SearchStrategy[list[Op]]:
    """Sequences of writes, deletes, version deletes, undeletes, promotions and clock moves."""
    names = st.sampled_from(NAMES)
    write = st.builds(Op, kind=st.just("write"), name=names, content=st.binary(max_size=8))
    delete_version = st.builds(Op, kind=st.just("delete_version"), name=names, pick=st.integers(0, 20))
    # Writes and version deletes are drawn more often, so that sequences reach soft-deleted
    # versions, and clock moves reach past every retention, so that purges happen.
    op = st.one_of(
        write,
        write,
        st.builds(Op, kind=st.just("delete"), name=names),
        delete_version,
        delete_version,
        st.builds(Op, kind=st.just("undelete"), name=names),
        st.builds(Op, kind=st.just("promote"), name=names, pick=st.integers(0, 20)),
        st.builds(Op, kind=st.just("set_retention"), days=st.integers(1, 3)),
        st.builds(
            Op, kind=st.just("advance"), seconds=st.sampled_from([0.0, 1e-6, 60.0, 86_400.0, 4 * 86_400.0])
        ),
    )
    return st.lists(op, min_size=min_size, max_size=max_size)


def pick_version(model: BlobModel, op: Op, *, previous_only: bool) -> str | None:
    """The version an operation names: any the model knows (live or not), so that errors are
    drawn too, but never the current one when ``previous_only``."""
    state = model.blobs.get(op.name)
    if state is None:
        return None
    candidates = sorted(v for v in state.versions if not (previous_only and v == state.current))
    return candidates[op.pick % len(candidates)] if candidates else None


def apply(model: BlobModel, op: Op) -> Any:
    """Apply ``op`` to the model; the real-server test maps each kind to the SDK call named in
    the method's docstring. Returns the result or the ``ModelError``; ``None`` if skipped."""
    actions: dict[str, Callable[[], Any]] = {
        "write": lambda: model.write(op.name, op.content),
        "delete": lambda: model.delete(op.name),
        "undelete": lambda: model.undelete(op.name),
        "set_retention": lambda: model.set_retention(op.days),
        "advance": lambda: model.advance(timedelta(seconds=op.seconds)),
    }
    if op.kind in ("delete_version", "promote"):
        vid = pick_version(model, op, previous_only=op.kind == "delete_version")
        if vid is None:
            return None
        actions[op.kind] = (
            (lambda: model.delete_version(op.name, vid))
            if op.kind == "delete_version"
            else (lambda: model.promote(op.name, vid))
        )
    try:
        return actions[op.kind]()
    except ModelError as error:
        return error
