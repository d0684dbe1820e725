"""Request XML bodies on every service: a document type declaration is refused in any encoding
(400 ``InvalidXmlDocument``, before an entity is expanded), so is nesting deeper than any Azure
document, and well-formed UTF-16 documents without one still work."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.blob.test_blob_memory import Peak, rss
from tests.blobhttp import BlobHttp
from tests.queuehttp import QueueHttp
from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess

MIB = 1024 * 1024
ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "utf-8": lambda text: text.encode("utf-8"),
    "utf-16-le-bom": lambda text: b"\xff\xfe" + text.encode("utf-16-le"),
    "utf-16-be-bom": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
}
ACL = (
    "<SignedIdentifiers><SignedIdentifier><Id>{x}</Id><AccessPolicy><Permission>r</Permission>"
    "</AccessPolicy></SignedIdentifier></SignedIdentifiers>"
)
# Unknown elements of Set Service Properties are ignored: accepted, the document changes nothing.
PROPERTIES = "<StorageServiceProperties><Other>{x}</Other></StorageServiceProperties>"


def declared(encoding: str, document: str) -> bytes:
    name = "UTF-8" if encoding == "utf-8" else "UTF-16"
    return ENCODINGS[encoding](f'<?xml version="1.0" encoding="{name}"?>{document}')


def laughs(root: str, levels: int = 4) -> str:
    """A small "billion laughs" DTD: entity ``e{levels}`` expands to 10**(levels+1) characters."""
    entities = '<!ENTITY e0 "laughlaugh">' + "".join(
        f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, levels + 1)
    )
    return f"<!DOCTYPE {root} [{entities}]>"


@dataclass
class Target:
    """One operation that reads an XML body: how to send it, and its document (``{x}`` marks a
    text node) with the status a well-formed one gets."""

    name: str
    send: Callable[[bytes], tuple[int, str | None]]
    document: str
    accepted: int


@dataclass
class Endpoints:
    blob: BlobHttp
    queue: QueueHttp
    table: RawClient
    container: str
    queue_name: str
    table_name: str

    def blob_send(self, method: str, path: str) -> Callable[[bytes], tuple[int, str | None]]:
        def send(body: bytes) -> tuple[int, str | None]:
            reply = self.blob.request(method, path, {"Content-Type": "application/xml"}, body)
            return reply.status, reply.code

        return send

    def queue_send(
        self, method: str, path: str | Callable[[], str]
    ) -> Callable[[bytes], tuple[int, str | None]]:
        def send(body: bytes) -> tuple[int, str | None]:
            target = path() if callable(path) else path
            response = self.queue.request(method, target, body)
            return response.status, response.header("x-ms-error-code")

        return send

    def table_send(self, path: str) -> Callable[[bytes], tuple[int, str | None]]:
        def send(body: bytes) -> tuple[int, str | None]:
            headers = {"Content-Type": "application/xml", "Accept": "application/xml"}
            response = self.table.request("PUT", path, body, headers)
            return response.status, response.header("x-ms-error-code")

        return send

    def fresh_receipt(self) -> str:
        """The path of Update Message for a message just put and taken."""
        body = "<QueueMessage><MessageText>m</MessageText></QueueMessage>"
        assert self.queue.request("POST", f"/{self.queue_name}/messages", body).status == 201
        taken = self.queue.request("GET", f"/{self.queue_name}/messages?visibilitytimeout=60").xml()
        message = taken.find("QueueMessage")
        assert message is not None
        receipt = quote(message.findtext("PopReceipt") or "", safe="")
        message_id = message.findtext("MessageId")
        return f"/{self.queue_name}/messages/{message_id}?popreceipt={receipt}&visibilitytimeout=0"

    def targets(self) -> list[Target]:
        message = "<QueueMessage><MessageText>{x}</MessageText></QueueMessage>"
        c, q = self.container, self.queue_name
        return [
            Target("put block list", self.blob_send("PUT", f"/{c}/b?comp=blocklist"),
                   "<BlockList><Latest>{x}</Latest></BlockList>", 201),
            Target("set container acl", self.blob_send("PUT", f"/{c}?restype=container&comp=acl"), ACL, 200),
            Target("set blob service properties",
                   self.blob_send("PUT", "/?restype=service&comp=properties"), PROPERTIES, 202),
            Target("put message", self.queue_send("POST", f"/{q}/messages"), message, 201),
            Target("update message", self.queue_send("PUT", self.fresh_receipt), message, 204),
            Target("set queue acl", self.queue_send("PUT", f"/{q}?comp=acl"), ACL, 204),
            Target("set queue service properties",
                   self.queue_send("PUT", "/?restype=service&comp=properties"), PROPERTIES, 202),
            Target("set table acl", self.table_send(f"{self.table_name}?comp=acl"), ACL, 204),
            Target("set table service properties",
                   self.table_send("?restype=service&comp=properties"), PROPERTIES, 202),
        ]  # fmt: skip


@pytest.fixture
def endpoints(server: ServerProcess, table_name: str) -> Iterator[Endpoints]:
    """A container holding a staged block ``YWFh``, a queue and a table, on the session server."""
    blob, queue, table = BlobHttp(server.blob_port), QueueHttp(server.queue_port), RawClient(server.port)
    container = f"x{table_name.lower()}"
    assert blob.request("PUT", f"/{container}?restype=container").status == 201
    assert blob.request("PUT", f"/{container}/b?comp=block&blockid=YWFh", {}, b"abc").status == 201
    assert queue.create(f"q{table_name.lower()}").status == 201
    assert table.create_table(table_name).status == 201
    yield Endpoints(blob, queue, table, container, f"q{table_name.lower()}", table_name)
    blob.request("DELETE", f"/{container}?restype=container")
    queue.delete(f"q{table_name.lower()}")
    table.request("DELETE", f"Tables('{table_name}')")


def test_well_formed_documents_in_every_encoding_are_accepted(endpoints: Endpoints) -> None:
    for target in endpoints.targets():
        text = "YWFh" if target.name == "put block list" else "id1"
        for encoding in ENCODINGS:
            status, code = target.send(declared(encoding, target.document.format(x=text)))
            assert (status, code) == (target.accepted, None), (target.name, encoding)


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_a_dtd_is_refused_in_every_encoding(endpoints: Endpoints, encoding: str) -> None:
    for target in endpoints.targets():
        root = target.document[1 : target.document.index(">")]
        bodies = {
            "entities": laughs(root) + target.document.format(x="&e4;"),
            "bare doctype": f"<!DOCTYPE {root}>" + target.document.format(x="id1"),
            "unused entity": f'<!DOCTYPE {root} [<!ENTITY u "v">]>' + target.document.format(x="id1"),
        }
        for kind, document in bodies.items():
            status, code = target.send(declared(encoding, document))
            assert (status, code) == (400, "InvalidXmlDocument"), (target.name, kind)


def test_deep_nesting_is_refused(endpoints: Endpoints) -> None:
    for target in endpoints.targets():
        for depth in (40, 100_000):
            deep = "<a>" * depth + "</a>" * depth
            status, code = target.send(declared("utf-8", target.document.format(x=deep)))
            assert (status, code) == (400, "InvalidXmlDocument"), (target.name, depth)
    properties = endpoints.targets()[2]
    nested = "<a>" * 20 + "</a>" * 20
    assert properties.send(PROPERTIES.format(x=nested).encode()) == (202, None)  # 22 deep is fine


# ---------------------------------------------------------------------------------- memory


@pytest.fixture
def single_worker(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", extra_args=["--workers", "1"]).start()
    yield process
    process.stop()


def test_an_entity_bomb_in_utf16_does_not_grow_the_worker(single_worker: ServerProcess) -> None:
    """A 1 MiB UTF-16 block list whose entity would expand some 80-fold: refused at its DOCTYPE,
    so the worker's memory stays where it was (the check is loose: well under the expansion)."""
    assert single_worker.process is not None
    pid = single_worker.process.pid
    blob = BlobHttp(single_worker.blob_port)
    assert blob.request("PUT", "/bomb?restype=container").status == 201
    block = base64.b64encode(b"blk").decode()
    assert blob.request("PUT", f"/bomb/b?comp=block&blockid={block}", {}, b"abc").status == 201
    valid = declared("utf-16-le-bom", f"<BlockList><Latest>{block}</Latest></BlockList>")
    assert blob.request("PUT", "/bomb/b?comp=blocklist", {}, valid).status == 201  # warm the path up
    entity = "x" * 400
    references = "&e;" * (MIB // 6)  # six bytes each in UTF-16, each 400 characters once expanded
    document = (
        f'<!DOCTYPE BlockList [<!ENTITY e "{entity}">]><BlockList><Latest>{references}</Latest></BlockList>'
    )
    body = declared("utf-16-le-bom", document)
    before = rss(pid)
    started = time.monotonic()
    with Peak(pid) as peak:
        replies = [blob.request("PUT", "/bomb/b?comp=blocklist", {}, body) for _ in range(2)]
    assert peak.value - before < 50 * MIB, f"RSS grew by {(peak.value - before) / MIB:.0f} MiB"
    assert [(reply.status, reply.code) for reply in replies] == [(400, "InvalidXmlDocument")] * 2
    assert time.monotonic() - started < 30
