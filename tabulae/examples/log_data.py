"""Log-data anti-pattern: log entries in a table are either hot to write or costly to read; use append blobs.

The problem: log queries ask for a time span ("errors between 15:04 and 15:06"). Keyed by time
(PartitionKey = the day, or the hour), every log line of the moment goes to one partition, a
hot spot that caps the write rate (``prepend-append``, ``hot-partition``). Keyed by something
that spreads the writes (the source of the message), a time span is no longer a key range: the
query reads every partition of the table, scanning many entities to return a few, and every
scanned entity counts against the targets.

The design: write logs to Blob storage, the way Azure's own storage analytics does: an append
blob per source and hour, named so that the blob of a span is known (``2026/11/26/1500/web01.log``),
one line appended per message (or a buffered block of them). Reading a span is reading the
blobs of its hours, sequentially, which is what blobs are good at.

The trade-off: no server-side filter: the reader downloads the hour and filters it, and an
append blob takes at most 50,000 appends, so busy sources buffer lines into blocks or roll to a
new blob.
"""

from __future__ import annotations

from azure.storage.blob import BlobType

from tabulae.examples.harness import Example

TITLE = "Log-data anti-pattern: time-keyed (hot) or spread (scanned) tables; append blobs instead"

_SOURCES = 12
_PER_SOURCE = 100  # one message per source every 14 minutes: 23 hours of logs
_WINDOW = ("20261126T1504", "20261126T1506")


def _minute(source: int, i: int) -> str:
    minutes = i * 14 + source
    return f"20261126T{minutes // 60:02d}{minutes % 60:02d}"


def run(ex: Example) -> None:
    spread = ex.table("logsbysource")
    with ex.operation(f"{_SOURCES * _PER_SOURCE} log entries, PartitionKey = source ({_SOURCES} EGTs)"):
        for source in range(_SOURCES):
            spread.submit_transaction(
                [
                    ("create", {"PartitionKey": f"web{source:02d}", "RowKey": f"{_minute(source, i)}_{i:04d}",
                                "Level": "Error" if i % 3 == 0 else "Info", "Message": f"request {i} done"})
                    for i in range(_PER_SOURCE)
                ]
            )  # fmt: skip
    with ex.operation(f"entries between {_WINDOW[0][-4:]} and {_WINDOW[1][-4:]}: a table scan") as op:
        found = list(spread.query_entities(f"RowKey ge '{_WINDOW[0]}' and RowKey lt '{_WINDOW[1]}'"))
    ex.claim(
        set(op.classes) == {"table-scan"} and op.scanned == _SOURCES * _PER_SOURCE,
        f"with spread keys a time span is a table-scan: scanned {op.scanned} to return {len(found)}",
    )
    warned = ex.warnings(spread.table_name, "low-density-scan")
    ex.claim(len(warned) == 1, "the server warns about table scans of low query density")

    hot = ex.table("logsbyhour")
    with ex.operation("the same entries, PartitionKey = the hour") as op:
        by_hour: dict[str, list[dict[str, object]]] = {}
        for source in range(_SOURCES):
            for i in range(_PER_SOURCE):
                minute = _minute(source, i)
                by_hour.setdefault(minute[:11], []).append(
                    {
                        "PartitionKey": minute[:11],
                        "RowKey": f"{minute}_web{source:02d}",
                        "Message": f"request {i}",
                    }
                )
        for rows in by_hour.values():
            for start in range(0, len(rows), 100):
                hot.submit_transaction([("create", e) for e in rows[start : start + 100]])
    with ex.operation("the span, keyed by hour: a row-range") as op:
        ranged = list(
            hot.query_entities(
                f"PartitionKey eq '{_WINDOW[0][:11]}' and RowKey ge '{_WINDOW[0]}' "
                f"and RowKey lt '{_WINDOW[1]}'"
            )
        )
    ex.claim(
        len(ranged) == len(found) and dict(op.classes) == {"row-range": 1} and op.scanned == len(ranged),
        "keyed by hour the span is a cheap row-range, but every write of the hour went to one partition",
    )

    logs = ex.container("logs")
    hour_lines = sorted(
        (f"{_minute(source, i)} web{source:02d} request {i}\n", source)
        for source in range(_SOURCES)
        for i in range(_PER_SOURCE)
        if _minute(source, i).startswith(_WINDOW[0][:11])
    )
    blob = logs.get_blob_client(f"2026/11/26/{_WINDOW[0][9:11]}00/all.log")
    with ex.operation(
        f"append blob: {len(hour_lines)} lines of hour {_WINDOW[0][9:11]}, one append each"
    ) as op:
        blob.create_append_blob()
        for line, _source in hour_lines:
            blob.append_block(line.encode())
    ex.claim(op.requests == 1 + len(hour_lines), f"{len(hour_lines)} appends, each one request")
    with ex.operation("read the span: download the hour's blob, filter lines") as op:
        text = blob.download_blob().readall().decode()
    in_span = [line for line in text.splitlines() if _WINDOW[0] <= line[:13] < _WINDOW[1]]
    ex.claim(
        len(in_span) == len(found) and op.requests == 1 and not op.classes,
        f"one blob download holds the hour; {len(in_span)} lines are in the span, no table scanned",
    )
    ex.claim(blob.get_blob_properties().blob_type == BlobType.APPENDBLOB, "the log is an append blob")
