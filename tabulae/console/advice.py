"""What a query cost, in words: its class, and the design guide's advice when it scans far more
entities than it returns.

Azure counts every entity a query examines against the partition's and the account's targets,
and charges it as a transaction per page, so a query that scans 10,000 entities to return 10 is
slow and expensive even when its result looks small. The planner names the query's class
(``x-tabulae-query-class``) and counts what each page scanned (``x-tabulae-scanned``); this module
turns the two into the advice of the Table design guide.
"""

from __future__ import annotations

from dataclasses import dataclass

CLASS_NAMES = {
    "point": "point query",
    "row-range": "row range scan",
    "partition-scan": "partition scan",
    "table-scan": "table scan",
    "index-scan": "index scan",
}

CLASS_MEANING = {
    "point": "PartitionKey and RowKey are both fixed: one entity is read by key, the cheapest query.",
    "row-range": "PartitionKey is fixed and RowKey is a range: one partition, a slice of its index.",
    "partition-scan": "PartitionKey is fixed but nothing bounds the RowKey: the whole partition is read.",
    "table-scan": "No PartitionKey is fixed: every partition of the table is read.",
    "index-scan": "A property index (a Tabulae extension) found the candidates: only they are read.",
}

_ADVICE = {
    "table-scan": (
        "This table scan examined {scanned:,} entities to return {returned:,}. Put the PartitionKey "
        "(and a RowKey or RowKey range) in the filter. If you look entities up by this property "
        "often, store a second copy keyed by it (the index entity pattern), denormalise so the "
        "answer is one entity, or (on Tabulae only) add a property index below."
    ),
    "partition-scan": (
        "This partition scan examined {scanned:,} entities to return {returned:,}. Bound the RowKey "
        "too: design RowKeys so that the rows you ask for together sort together (a compound RowKey, "
        "or a second copy of the entity under another RowKey: the intra-partition secondary index "
        "pattern)."
    ),
    "row-range": (
        "This row range scan examined {scanned:,} entities to return {returned:,}. Narrow the RowKey "
        "range, or make the property you filter on part of the RowKey."
    ),
}

WASTE_RATIO = 10  # scanned more than this many times what was returned ...
WASTE_MINIMUM = 100  # ... and at least this many entities: worth a word


@dataclass(frozen=True, slots=True)
class QueryCost:
    """One page's figures and the words for them."""

    query_class: str
    scanned: int
    returned: int

    @property
    def name(self) -> str:
        return CLASS_NAMES.get(self.query_class, self.query_class)

    @property
    def meaning(self) -> str:
        return CLASS_MEANING.get(self.query_class, "")

    @property
    def advice(self) -> str | None:
        """The design guide's advice when the page scanned far more than it returned."""
        wasteful = self.scanned >= WASTE_MINIMUM and self.scanned > WASTE_RATIO * max(self.returned, 1)
        template = _ADVICE.get(self.query_class)
        if not wasteful or template is None:
            return None
        return template.format(scanned=self.scanned, returned=self.returned)
