"""The console's queues page: depth and poison counts, peeked messages (escaped), put, clear, delete."""

from __future__ import annotations

import uuid

from azure.storage.queue import QueueServiceClient

from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def test_queues_page_peeks_puts_clears_and_warns_of_poison(server: ServerProcess) -> None:
    name = f"q{uuid.uuid4().hex[:12]}"
    hostile = "<script>alert(1)</script>"
    with QueueServiceClient.from_connection_string(server.connection_string) as service:
        queue = service.create_queue(name)
        queue.send_message("keeps failing")
        for _ in range(6):  # taken six times, never deleted: a poison message (threshold 5)
            for message in queue.receive_messages(visibility_timeout=30, max_messages=1):
                queue.update_message(message, visibility_timeout=0)
        queue.send_message(hostile)
        console = ConsoleClient(server.port)
        assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
        listing = console.get(f"/queues?prefix={name}")
        assert listing.status == 200 and f">{name}</a>" in listing.text
        page = console.get(f"/queues/{name}")
        assert page.status == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text
        assert "poison" in page.text and "dequeued more than 5 times" in page.text
        peeked = queue.peek_messages(max_messages=32)
        assert len(peeked) == 2  # looking changed nothing for consumers

        assert console.post(f"/queues/{name}/put", {"text": "from the console", "ttl": "60"}).status == 303
        assert "from the console" in [m.content for m in queue.peek_messages(max_messages=32)]
        refused = console.post(f"/queues/{name}/put", {"text": "x", "delay": "soon"})
        assert refused.status == 400
        assert console.post(f"/queues/{name}/clear", {}).status == 303
        assert queue.peek_messages(max_messages=32) == []
        assert console.post(f"/queues/{name}/delete", {"confirm": "wrong"}).status == 400
        assert console.post(f"/queues/{name}/delete", {"confirm": name}).status == 303
        assert name not in [q.name for q in service.list_queues(name_starts_with=name)]
        created = console.post("/queues", {"name": name})
        assert created.status == 303
        service.delete_queue(name)
