"""Every console page shows text beyond ASCII as text, in the page's own markup.

A page is assembled from escaped pieces; escaping one of them twice turns the page's own markup
into visible text (the entity form once came out that way whenever a value was not ASCII). So
each page is loaded holding such names and values, and checked for the text itself, for its
fields and links, and for none of its own tags shown escaped. The typed fields of an entity
refuse digits that are not ASCII, as the service does in a request body.
"""

from __future__ import annotations

import re
import uuid
from urllib.parse import quote

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

TEXT = "Édith Piaf 李小龍 𝄞 \U0010ffff"
OWN_TAG_ESCAPED = re.compile(
    r"&lt;/?(?:tr|td|th|form|input|textarea|select|option|span|a|p|li|section|div)\b"
)


def _signed_in(server: ServerProcess) -> ConsoleClient:
    console = ConsoleClient(server.port)
    assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    return console


def _shown(page_text: str, *texts: str) -> None:
    assert OWN_TAG_ESCAPED.search(page_text) is None, OWN_TAG_ESCAPED.search(page_text)
    for text in texts:
        assert text in page_text, text


def test_table_pages_show_unicode_keys_names_and_values(server: ServerProcess, table_name: str) -> None:
    console = _signed_in(server)
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(table_name)
        try:
            table.create_entity({"PartitionKey": "Ünï", "RowKey": "李", "Größe": TEXT, "n": 1})
            table.create_entity({"PartitionKey": "\U0010ffff\ud7ff", "RowKey": "\ue000", "v": "x"})
            grid = console.get(f"/tables/{table_name}")
            assert grid.status == 200
            _shown(grid.text, "Ünï", "Größe", TEXT, "\U0010ffff\ud7ff")
            links = re.findall(rf'href="/-/console/tables/{table_name}/e/([^"]+)"', grid.text)
            assert len(links) == 2
            for link in links:
                entity = console.get(f"/tables/{table_name}/e/{link}")
                assert entity.status == 200
                _shown(entity.text, '<input name="name.0"', '<textarea name="value.0"')
            entity = console.get(f"/tables/{table_name}/e/{links[0]}")  # "Ünï" sorts first
            _shown(entity.text, 'value="Größe"', TEXT + "</textarea>")
        finally:
            service.delete_table(table_name)


def test_typed_fields_refuse_digits_that_are_not_ascii(server: ServerProcess, table_name: str) -> None:
    console = _signed_in(server)
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(table_name)
        try:
            for kind, text in (
                ("Edm.Int32", "١٢٣"),
                ("Edm.Int64", "１２"),
                ("Edm.Double", "١.٥"),
                ("Edm.DateTime", "２024-01-01T00:00:00Z"),
                ("Edm.Guid", "０f8fad5b-d9cb-469f-a165-70867728950e"),
                ("Edm.Binary", "AAé="),
                ("Edm.Boolean", "ｔrue"),
            ):
                fields = {"pk": "p", "rk": kind, "name.0": "v", "type.0": kind, "value.0": text}
                answer = console.post(f"/tables/{table_name}/new", fields)
                assert answer.status == 400 and "InvalidInput" in answer.text, kind
            assert list(table.list_entities()) == []
        finally:
            service.delete_table(table_name)


def test_queue_blob_and_insight_pages_show_unicode(server: ServerProcess, table_name: str) -> None:
    console = _signed_in(server)
    name = f"q{uuid.uuid4().hex[:12]}"
    with QueueServiceClient.from_connection_string(server.connection_string) as queues:
        queue = queues.create_queue(name, metadata={"note": "ascii"})
        try:
            queue.send_message(TEXT)
            assert console.post(f"/queues/{name}/put", {"text": "ajouté 🙂", "ttl": "60"}).status == 303
            page = console.get(f"/queues/{name}")
            assert page.status == 200
            _shown(page.text, TEXT, "ajouté 🙂")
            assert {m.content for m in queue.peek_messages(max_messages=32)} == {TEXT, "ajouté 🙂"}
        finally:
            queues.delete_queue(name)

    container = f"c{uuid.uuid4().hex[:12]}"
    blob_name = "Édith/李小龍 𝄞.txt"
    with BlobServiceClient.from_connection_string(server.connection_string) as blobs:
        client = blobs.create_container(container)
        try:
            client.upload_blob(blob_name, TEXT.encode(), metadata={"note": "ascii"})
            folders = console.get(f"/blobs/{container}")
            assert folders.status == 200
            _shown(folders.text, "Édith/")
            flat = console.get(f"/blobs/{container}?flat=1")
            _shown(flat.text, blob_name)
            inside = console.get(f"/blobs/{container}?prefix={quote('Édith/')}")
            _shown(inside.text, "李小龍 𝄞.txt")
            download = console.get(f"/blobs/{container}/download?name={quote(blob_name)}")
            assert download.status == 200 and download.body == TEXT.encode()
        finally:
            client.delete_container()

    with TableServiceClient.from_connection_string(server.connection_string) as service:
        table = service.create_table(table_name)
        try:
            for number in range(3):
                table.create_entity({"PartitionKey": "Ünïcödé 李", "RowKey": f"r{number}", "v": TEXT})
            # Each worker process counts its own requests: ask until the one that served them answers.
            for _ in range(40):
                insight = console.get("/insight")
                assert insight.status == 200
                if table_name in insight.text:
                    break
            _shown(insight.text, table_name, "Ünïcödé 李")
        finally:
            service.delete_table(table_name)
