"""Long filtered scans read through a memory-mapped connection that closes when scans stop.

The map makes a scan cheaper but counts in the process's RSS while it stays, so the store must
open it only for scans that continue past one window, answer exactly as the plain reader does,
and drop it once scans stop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tabulae.model import edm
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.scans import FULL_RANGE, PropertyTest
from tabulae.storage.sqlite import SqliteStores, mapped_reader
from tabulae.storage.sqlite.tables import SqliteTables

ROWS = 300
WINDOW = 40  # rows examined per store call, as the service's scan window but small


async def _scan_all(store: SqliteTables, condition: PropertyTest) -> tuple[list[str], int, int]:
    """Every match of a full scan, window after window; the calls made and rows examined."""
    found: list[str] = []
    after = None
    calls = examined = 0
    while True:
        chunk = await store.scan_filtered("acct", "scan", [FULL_RANGE], after, WINDOW, ROWS + 1, condition)
        calls += 1
        examined += chunk.examined
        found.extend(entity.rk for entity in chunk.rows)
        if chunk.exhausted or chunk.last_key is None:
            return found, calls, examined
        after = chunk.last_key


def _tag(index: int) -> str:
    return "even" if index % 2 == 0 else "odd"


async def _scenario(directory: Path) -> None:
    engine = SqliteStores(directory)
    store = engine.tables
    assert isinstance(store, SqliteTables)
    try:
        await store.create_table("acct", "scan")
        for start in range(0, ROWS, 100):
            mutations = [
                Mutation(MutationKind.INSERT, "p", f"r{index:04d}", {"tag": (edm.STRING, _tag(index))})
                for index in range(start, start + 100)
            ]
            await store.apply("acct", "scan", mutations)
        mapped = engine.database.scan_reader

        # A query that ends in its first window never opens the map.
        first = await store.scan_filtered(
            "acct",
            "scan",
            [FULL_RANGE],
            None,
            ROWS * 2,
            ROWS + 1,
            PropertyTest("tag", "eq", edm.STRING, "odd"),
        )
        assert len(first.rows) == ROWS // 2 and first.exhausted
        assert not mapped.is_open

        # A scan that continues opens it, maps the file, and finds exactly what the plain reader finds.
        found, calls, examined = await _scan_all(store, PropertyTest("tag", "eq", edm.STRING, "even"))
        assert found == [f"r{index:04d}" for index in range(0, ROWS, 2)]
        assert calls > 1 and examined == ROWS
        assert mapped.is_open
        assert mapped.connection().execute("PRAGMA mmap_size").fetchone()[0] > 0
        assert engine.database.reader.execute("PRAGMA mmap_size").fetchone()[0] == 0

        # Once scans stop, it closes (and its mapped pages leave the process).
        for _ in range(100):
            if not mapped.is_open:
                break
            await asyncio.sleep(0.02)
        assert not mapped.is_open

        # Continuing scans reopen it.
        again, _calls, _examined = await _scan_all(store, PropertyTest("tag", "eq", edm.STRING, "even"))
        assert again == found
        assert mapped.is_open
    finally:
        await engine.close()
    assert not mapped.is_open


def test_long_scans_use_a_map_that_closes_when_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped_reader, "IDLE_SECONDS", 0.05)
    asyncio.run(_scenario(tmp_path))
