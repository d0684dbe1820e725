"""Re-keying an account's blob rows when its hierarchical namespace is turned on or off.

How an account's rows are keyed (:mod:`.blob_keys`) follows the server's settings, which may
change between restarts: a store written while an account was flat and then served with
``--hns`` (or the other way round) holds rows under the other rule. ``serve`` settles that once,
before any worker starts (:func:`settle`): for each served account whose recorded mode
(``blob_key_modes``) differs from the wanted one, it records the wanted mode as not yet settled,
moves every container's rows in batches of names, and then records it settled.

Citus refuses an ``UPDATE`` of a distribution column, so a batch deletes the rows it moves and
inserts them under their new key (one statement per table, ``WITH old AS (DELETE … RETURNING *)
INSERT … SELECT … FROM old``), in one transaction: a batch commits all of its blobs' rows or
none, so after a crash (a ``kill -9`` between batches or inside one) each blob is whole under
one key or the other. A batch finds its blobs by their key not being the wanted one (having
the container's key, or not having it), so running again (after a crash, or with the setting
flipped back meanwhile) moves exactly what is left.
Content chunks are copied to the new key and the old ones left as garbage, freed by the
collector once nothing names them (in a file system kept on one key a copy shares its source's
extents, so one extent may be named by several blobs that a batch does not all move).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import psycopg

from tabulae.storage.plan import Plan, PostgresDialect, Sql, run_async
from tabulae.storage.postgres.blob_keys import BLOB_DKEY_SQL, container_dkey, keyed_name

BATCH_NAMES = 500  # blob names a batch moves (with every version, block, tag and page of each)
SETTLE_LOCK = 0x7461_6275_6C61_6501  # a session advisory lock: one server settles at a time

# Each table's columns after ``dkey``.
_COLUMNS = {
    "blobs": "container_id, name, version, committed, ticks, size, doc, staged, staged_id_length",
    "blob_extents": "container_id, name, version, seq, ref, length, block_id",
    "blob_blocks": "container_id, name, block_id, seq, ref, length",
    "blob_tags": "container_id, name, tag, value",
    "blob_pages": "container_id, name, version, page_start, page_end, ref, ref_offset, cleared",
}
_WITH_CONTENT = ("blob_extents", "blob_blocks", "blob_pages")


def _target(colocated: bool, name: str = "name") -> str:
    """The wanted key of a row named by column ``name``."""
    return ":kc" if colocated else BLOB_DKEY_SQL.format(name=name)


@cache
def _statements(colocated: bool) -> tuple[str, tuple[str, ...]]:
    """The batch's name query, and its moves: content copied, its old keys made garbage, rows."""
    # A row not keyed as wanted is keyed the other way: spread rows are found by not having the
    # container's key, kept ones by having it (Citus calls no hash on a column where it deletes).
    wrong = f"container_id = :c AND dkey {'<>' if colocated else '='} :kc"
    names = f"SELECT DISTINCT name FROM blobs WHERE {wrong} AND name > :after ORDER BY name LIMIT :n"
    batch = f"{wrong} AND name = ANY(:names)"
    moves: list[str] = []
    for table in _WITH_CONTENT:
        moves.append(
            "INSERT INTO blob_chunks (dkey, ref, seq, data) SELECT e.new, ch.ref, ch.seq, ch.data"
            f" FROM blob_chunks AS ch JOIN (SELECT DISTINCT dkey, ref, {_target(colocated)} AS new"
            f" FROM {table} WHERE {batch}) AS e ON ch.dkey = e.dkey AND ch.ref = e.ref"
            " ON CONFLICT (dkey, ref, seq) DO NOTHING"
        )
        moves.append(
            f"INSERT INTO blob_garbage (dkey, ref, dropped) SELECT DISTINCT dkey, ref, now() FROM {table}"
            f" WHERE {batch} ON CONFLICT (dkey, ref) DO UPDATE SET dropped = excluded.dropped"
        )
    for table, columns in _COLUMNS.items():
        moves.append(
            f"WITH old AS (DELETE FROM {table} WHERE {batch} RETURNING *)"
            f" INSERT INTO {table} (dkey, {columns}) SELECT {_target(colocated, 'old.name')}, {columns}"
            " FROM old"
        )
    return names, tuple(moves)


def _batch(account: str, cid: int, container: str, colocated: bool, after: str) -> Plan[str | None]:
    """Move the next batch of the container's blobs to their wanted key; the last name moved,
    or None when none was left."""
    names_sql, moves = _statements(colocated)
    params = {"c": cid, "account": account, "dcontainer": container, "kc": container_dkey(account, container),
              "after": after, "n": BATCH_NAMES}  # fmt: skip
    rows = yield Sql(names_sql, params, "all")
    if not rows:
        return None
    names = [str(row[0]) for row in rows]
    for statement in moves:
        yield Sql(statement, {**params, "names": names})
    return names[-1]


def _mode(account: str) -> Plan[tuple[bool, bool] | None]:
    row = yield Sql("SELECT colocated, settled FROM blob_key_modes WHERE account = :account",
                    {"account": account}, "one")  # fmt: skip
    return (bool(row[0]), bool(row[1])) if row else None


def _record(account: str, colocated: bool, settled: bool) -> Plan[None]:
    yield Sql(
        "INSERT INTO blob_key_modes (account, colocated, settled) VALUES (:account, :colocated, :settled)"
        " ON CONFLICT (account) DO UPDATE SET colocated = excluded.colocated, settled = excluded.settled",
        {"account": account, "colocated": colocated, "settled": settled},
    )


def _containers(account: str) -> Plan[list[tuple[int, str]]]:
    """Every container of the account with the name its blobs are keyed by: soft-deleted ones
    too, whose rows come back with them."""
    rows = yield Sql("SELECT id, name FROM blob_containers WHERE account = :account ORDER BY name",
                     {"account": account}, "all")  # fmt: skip
    return [(int(row[0]), keyed_name(str(row[1]))) for row in rows]


async def settle(url: str, accounts: Iterable[str], colocated: frozenset[str]) -> list[str]:
    """Key the rows of every account of ``accounts`` as ``colocated`` says (those named there
    kept one container to a key, the others spread blob by blob); returns what it moved, one
    line per account, for the operator. Idempotent; holds a session lock while it works, so
    servers starting together on one database settle one after the other."""
    dialect = PostgresDialect()
    done: list[str] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (SETTLE_LOCK,))
        for account in accounts:
            wanted = account in colocated
            mode = await run_async(_mode(account), conn, dialect)
            if mode == (wanted, True) or (mode is None and not wanted):
                continue  # keyed as wanted (no record: spread, as every store before modes were kept)
            async with conn.transaction():
                await run_async(_record(account, wanted, False), conn, dialect)
            moved = 0
            for cid, container in await run_async(_containers(account), conn, dialect):
                after: str | None = ""
                while after is not None:
                    async with conn.transaction():
                        after = await run_async(_batch(account, cid, container, wanted, after), conn, dialect)
                    moved += after is not None
            async with conn.transaction():
                await run_async(_record(account, wanted, True), conn, dialect)
            how = "one key per container (hierarchical namespace)" if wanted else "one key per blob"
            done.append(f"re-keyed the blobs of account {account}: {how}, {moved} batch(es)")
    return done
