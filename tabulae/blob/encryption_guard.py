"""The request's encryption, met by every blob write in its transaction.

The Blob front-end names each request's :class:`~tabulae.blob.rules.encryption.Encryption`
(:data:`REQUEST`, set around the handler) and :class:`~tabulae.blob.protection.GuardedStore`
passes each write's decision through :func:`check`, like its other guards: judged by what the
decision does (stages a block, replaces the content, changes the blob in place), so the
operations need no parameter of their own. The guard reads :data:`REQUEST` when the write is
handed to the store, in the request's own context, never inside the decision: a store may run
decisions elsewhere (SQLite's group commit runs a whole group in the task of the request that
started it). Writes outside a request (a pending copy finishing, the purge) carry none and are
left as decided.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import replace

from tabulae.blob.rules.encryption import (
    Encryption,
    check_copy_source,
    check_in_place,
    check_staged,
    staged_with,
    stamped,
)
from tabulae.storage.blobs import BlobState, BlobWrite

REQUEST: ContextVar[Encryption | None] = ContextVar("tabulae_blob_encryption", default=None)


def scope_only() -> Encryption | None:
    """The request's encryption without its key: what a directory made on the way to a path
    takes (its scope, never the key of the file the request writes)."""
    encryption = REQUEST.get()
    return None if encryption is None else Encryption(scope=encryption.scope)


def check(state: BlobState, write: BlobWrite, encryption: Encryption | None) -> None:
    """Refuse ``write`` where the request's key or scope (``encryption``, read from
    :data:`REQUEST` in the request's context) is not the blob's (or its staged blocks'); give a
    new blob the request's key and scope. A copy's source written with a key is refused
    whatever the request (it cannot name that key)."""
    if state.source is not None and write.base is not None:
        check_copy_source(state.source)
    if encryption is None:
        return
    base = state.base
    live = base if base is not None and base.deleted_time is None else None  # a blob, or staged blocks
    existing = live is not None and live.committed
    if encryption.checks and live is not None and existing:
        check_in_place(live, encryption)
    if write.stage_block is not None and live is not None:
        # Put Block: the blocks staged since are remembered with the blob where their key or
        # scope is not its own (its ETag stays: staging changes nothing a reader sees). The
        # blob remembers one key for all its staged blocks, so a block under another key than
        # those staged is refused with the codes of a commit under it (assumed: no source says
        # what Azure answers), and a commit never names blocks of two keys.
        wanted = [encryption.scope, encryption.key_sha256]
        if staged_with(live) != wanted:
            if state.staged_count:
                check_staged(staged_with(live), encryption)
            write.base = replace(write.base or live, staged_encryption=wanted)
        return
    new = write.base
    if new is None or (existing and write.content is None):
        return  # unchanged, or changed in place (its record keeps the blob's key and scope)
    if encryption.commits and live is not None:
        check_staged(staged_with(live), encryption)
        if existing and _names_committed(state, write):
            check_in_place(live, encryption)  # its committed blocks are under the blob's key
    write.base = stamped(new, encryption)


def _names_committed(state: BlobState, write: BlobWrite) -> bool:
    """Whether a commit's content keeps any of the blob's committed blocks."""
    if not state.content or not write.content:
        return False
    committed = {extent.ref for extent in state.content}
    return any(extent.ref in committed for extent in write.content)
