"""Property indexes built at the same time on several tables of one store all become ready.

On PostgreSQL two ``CREATE INDEX CONCURRENTLY`` of expression indexes wait for each other's
snapshots (only plain indexes are exempt), so builds started together could deadlock and end
FAILED; the store must retry the one PostgreSQL chose as the deadlock's victim.
"""

from __future__ import annotations

import asyncio

from tabulae.model import edm
from tabulae.model.indexes import READY
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.tables import TableStore
from tabulae.table.service import TableService
from tests.storage.conftest import Backend

TABLES = 4


def test_index_builds_started_together_all_become_ready(backend: Backend) -> None:
    async def body(store: TableStore) -> None:
        service = TableService(store)
        names = [f"builds{n}" for n in range(TABLES)]
        for name in names:
            await service.create_table(backend.account, name)
            rows = [
                Mutation(MutationKind.INSERT, "p", f"r{i:03}", {"P": (edm.STRING, f"v{i}")})
                for i in range(40)
            ]
            await store.apply(backend.account, name, rows)
        built = await asyncio.gather(
            *(service.add_index(backend.account, name, "P", edm.STRING, wait=True) for name in names)
        )
        assert [(info.table, info.state, info.error) for info in built] == [(n, READY, None) for n in names]

    backend.run(body)
