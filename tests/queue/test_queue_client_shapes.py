"""What other clients send, replayed byte for byte: the JavaScript SDK (``@azure/storage-queue``)
and the az CLI (``az storage queue``, ``az storage message``).

``fixtures/queue-*.json`` hold every request each client made in a session of its own (captured
on the wire, with the answers' status codes and the message ids and pop receipts they carried).
The replay sends the same methods, paths, queries, headers and bodies in the same order, with
the queue's name, the ids and the receipts swapped for the ones this server hands out, a fresh
``x-ms-date`` and a Shared Key signature made here (SAS tokens are signed again with the same
fields), and expects the same status codes. The JavaScript SDK itself runs in
``test_queue_js_sdk.py`` where Node is installed; the az CLI is too large to install in a test.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, quote

import pytest

from tests.queuehttp import QueueHttp, account_sas, queue_sas

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("queue-*.json"))
_EXPIRY = re.compile(r"<Expiry>(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


def _future(recorded: str) -> str:
    """A time a day from now, written with the recorded value's date and time fields."""
    ahead = datetime.now(UTC) + timedelta(days=1)
    return max(recorded, ahead.strftime("%Y-%m-%dT%H:%M:%S"))


_SAS_FIELDS = {"sv", "ss", "srt", "sp", "se", "st", "si", "sip", "spr", "sig", "ses"}


def resigned(target: str, queue: str) -> str:
    """The target with its SAS made again: same kind and fields, a future expiry, our signature."""
    path, _, query = target.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    rest = [(k, v) for k, v in pairs if k not in _SAS_FIELDS]
    fields = dict((k, v) for k, v in pairs if k in _SAS_FIELDS)
    if "ss" in fields:
        token = account_sas(ss=fields["ss"], srt=fields["srt"], sp=fields["sp"])
    elif "si" in fields:
        token = queue_sas(queue, sp="", si=fields["si"], sv=fields["sv"])
    else:
        token = queue_sas(queue, sp=fields["sp"], sv=fields["sv"])
    encoded = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in [*rest, *token.items()])
    return f"{path}?{encoded}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda path: path.stem)
def test_replay(queue_http: QueueHttp, fixture: Path) -> None:
    recorded = json.loads(fixture.read_text())
    queue = f"replay{uuid.uuid4().hex[:12]}"
    swaps: dict[str, str] = {recorded["queue"]: queue}

    def swap(text: str) -> str:
        for old, new in swaps.items():
            text = text.replace(old, new)
        # A stored policy's expiry was a moment after the capture: keep its form, move it ahead.
        return _EXPIRY.sub(lambda m: f"<Expiry>{_future(m.group(1))}", text)

    account_prefix = f"/{queue_http.account}"
    for index, step in enumerate(recorded["steps"]):
        target = swap(step["target"])
        assert target.startswith(account_prefix + "/"), target
        if step["auth"] == "SAS":
            target = resigned(target, queue)
        headers: dict[str, str | None] = {name: swap(value) for name, value in step["headers"]}
        response = queue_http.request(
            step["method"],
            target[len(account_prefix) :],
            swap(step["body"]).encode() if step["body"] else None,
            headers,
            auth="SharedKey" if step["auth"] == "SharedKey" else "none",
        )
        where = f"{recorded['client']} step {index}: {step['method']} {step['target']}"
        assert response.status == step["status"], f"{where}: {response!r}"
        if response.status >= 300:
            continue
        # What this answer carries stands in for what the recorded one did in later steps.
        messages = list(response.xml()) if b"<QueueMessagesList>" in response.body else []
        ids = [m.findtext("MessageId") or "" for m in messages]
        receipts = [m.findtext("PopReceipt") for m in messages if m.find("PopReceipt") is not None]
        receipts = [r or "" for r in receipts]
        if response.header("x-ms-popreceipt"):
            receipts.append(response.header("x-ms-popreceipt") or "")
        assert len(ids) == len(step["ids"]) and len(receipts) == len(step["receipts"]), where
        for old, new in [*zip(step["ids"], ids, strict=True), *zip(step["receipts"], receipts, strict=True)]:
            swaps[old] = new
            swaps[quote(old, safe="")] = quote(new, safe="")
