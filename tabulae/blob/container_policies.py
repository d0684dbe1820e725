"""Container-level WORM policies and legal holds on a container's record: what the signed admin
endpoint reads and changes (Azure's management plane keeps them; see
:mod:`tabulae.blob.rules.container_worm` for the rules and :mod:`tabulae.blob.worm_guard` for
what they refuse). Changing one leaves the container's ETag as it is."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tabulae.blob.rules import container_worm as rules
from tabulae.blob.service import BlobService
from tabulae.model.blobs import ContainerRecord, ContainerWorm
from tabulae.model.errors import ServiceError


async def get(service: BlobService, account: str, container: str) -> ContainerWorm | None:
    """The container's policy and hold; 404 ContainerNotFound."""
    return (await service.get_container(account, container)).worm


async def change(service: BlobService, account: str, container: str, changes: Any) -> ContainerWorm | None:
    """Apply the admin document ``changes``: 400 InvalidInput naming the field for a change the
    rules refuse, 404 ContainerNotFound."""

    def decide(record: ContainerRecord, ticks: int) -> tuple[ContainerRecord, ContainerWorm | None]:
        try:
            worm = rules.change(record.worm, changes)
        except rules.WormError as error:
            raise ServiceError("InvalidInput", f"One of the request inputs is not valid: {error}") from None
        return replace(record, worm=worm), worm

    result: ContainerWorm | None = await service.store.update_container(account, container, decide)
    forget = getattr(service.store, "worms", None)
    if forget is not None:
        forget.forget(account, container)
    return result
