"""Retrieving many entities: pages of at most 1,000, continuation tokens, ``$top`` and ``$select``.

The problem: a query never returns more than 1,000 entities in one answer (nor more than five
seconds' work, on Azure); it returns a page and a continuation token for the rest. Code that
reads only the first answer silently misses data; code that always reads everything pays for
entities it does not show.

The design: follow continuation tokens until there are none (Microsoft's SDKs do it when you
iterate a query), set a page size (``$top``) to what the screen shows, and project the
properties needed (``$select``). A continuation token can be kept and used later to resume.

The trade-off: each page is a request; a page can even be empty while the query goes on, so
only the absence of a token means the end.
"""

from __future__ import annotations

from typing import Any

from tabulae.examples.harness import Example

TITLE = "Many entities: 1,000 a page, continuation tokens followed, $top pages, $select"

_ENTITIES = 2100


def run(ex: Example) -> None:
    table = ex.table("continuation")
    with ex.operation(f"{_ENTITIES} entities in one partition ({_ENTITIES // 100} EGTs)"):
        for start in range(0, _ENTITIES, 100):
            table.submit_transaction(
                [
                    ("create", {"PartitionKey": "Sales", "RowKey": f"{n:06d}", "Amount": n, "Note": "x" * 50})
                    for n in range(start, start + 100)
                ]
            )
    with ex.operation("read them all: the SDK follows the continuation tokens") as op:
        everything = list(table.query_entities("PartitionKey eq 'Sales'", select=["Amount"]))
    ex.claim(len(everything) == _ENTITIES, f"all {_ENTITIES} entities arrived")
    ex.claim(
        op.requests == 3 and dict(op.classes) == {"row-range": 3} and op.scanned == _ENTITIES + 2,
        "in 3 pages of at most 1,000: each page a row-range, scanning what it returned and the "
        "next entity (its key is the continuation token)",
    )
    ex.claim(all(set(e) == {"Amount"} for e in everything), "$select sent only the Amount property")
    with ex.operation("a screen of 20: $top=20, first page only, token kept") as op:
        pages: Any = table.query_entities("PartitionKey eq 'Sales'", results_per_page=20).by_page()
        screen = list(next(pages))
        token = pages.continuation_token
    ex.claim(
        len(screen) == 20 and op.requests == 1 and op.scanned == 21 and token is not None,
        "one request scanning 21 entities, with a token for the next screen",
    )
    with ex.operation("the next screen, later, from the kept token") as op:
        later = table.query_entities("PartitionKey eq 'Sales'", results_per_page=20).by_page(
            continuation_token=token
        )
        second = list(next(later))
    ex.claim(
        second[0]["Amount"] == 20 and op.requests == 1, "the token resumes exactly after the first screen"
    )
