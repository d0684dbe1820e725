"""Wide entities: a logical entity of more than 252 properties, stored as several physical ones.

The problem: an entity holds at most 255 properties, three of which are PartitionKey, RowKey
and Timestamp: 252 of your own. A record with more (say, a message count for each of 300 days)
does not fit, and the service refuses it.

The design: split the properties over several entities that share the PartitionKey and have
RowKeys with a common prefix (``000123_part0``, ``000123_part1``). Write them in one entity
group transaction, so that readers never see half of a change, and read them back with one
row-range query over the prefix.

The trade-off: a read is a query instead of a point read, an update touching several parts
needs a transaction, and the application joins the parts.
"""

from __future__ import annotations

from tabulae.examples.harness import Example, refused

TITLE = "Wide entities: 300 properties over two entities, one EGT, one range read"

_PROPERTIES = 300
_PER_PART = 200


def run(ex: Example) -> None:
    table = ex.table("wideentities")
    values = {f"Day{d:03d}": d % 17 for d in range(_PROPERTIES)}
    with ex.operation(f"one entity with {_PROPERTIES} properties: refused"):
        too_many = refused(
            lambda: table.create_entity({"PartitionKey": "Sales", "RowKey": "000123", **values}),
            400,
            "TooManyProperties",
        )
    ex.claim(too_many, "the service refuses more than 252 properties of one's own: 400 TooManyProperties")
    names = sorted(values)
    parts = [names[i : i + _PER_PART] for i in range(0, len(names), _PER_PART)]
    with ex.operation(f"split over {len(parts)} entities, one EGT") as op:
        table.submit_transaction(
            [
                (
                    "create",
                    {"PartitionKey": "Sales", "RowKey": f"000123_part{n}", **{k: values[k] for k in part}},
                )
                for n, part in enumerate(parts)
            ]
        )
    ex.claim(op.requests == 1, f"{len(parts)} parts written atomically in one request")
    with ex.operation("read it back: one row-range over the RowKey prefix") as op:
        found = list(
            table.query_entities(
                "PartitionKey eq 'Sales' and RowKey ge '000123_part' and RowKey lt '000123_paru'"
            )
        )
    joined = {k: v for e in found for k, v in e.items() if k.startswith("Day")}
    ex.claim(joined == values, f"the {len(found)} parts join back into the {_PROPERTIES} properties")
    ex.claim(
        dict(op.classes) == {"row-range": 1} and op.scanned == len(parts),
        f"one row-range query scanning the {len(parts)} parts",
    )
