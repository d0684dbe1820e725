"""The queues page in a real browser: create a queue, put messages, see them peeked, clear it."""

from __future__ import annotations

import uuid

from azure.storage.queue import QueueServiceClient
from playwright.sync_api import Page, expect

from tests.console.browser.test_console import HOSTILE, _shoot, _sign_in
from tests.serverproc import ServerProcess


def test_queue_walkthrough(page: Page, server: ServerProcess) -> None:
    name = f"orders{uuid.uuid4().hex[:8]}"
    _sign_in(page, server)
    page.get_by_role("link", name="Queues").click()
    page.get_by_label("Queue name").fill(name)
    page.get_by_role("button", name="Create queue").click()
    expect(page.get_by_role("status")).to_contain_text(f"Queue {name} created")
    page.get_by_role("link", name=name).click()
    for text in ('{"order": 1042, "action": "ship"}', HOSTILE):
        page.get_by_label("Text").fill(text)
        page.get_by_role("button", name="Put message").click()
        expect(page.get_by_role("status")).to_contain_text("Message added")
    assert page.title() != "owned"
    messages = page.get_by_test_id("messages")
    expect(messages).to_contain_text("1042")
    expect(messages).to_contain_text(HOSTILE[:30])
    expect(page.get_by_test_id("depth")).to_contain_text("2 message(s)")
    _shoot(page, "queue")
    with QueueServiceClient.from_connection_string(server.connection_string) as service:
        queue = service.get_queue_client(name)
        assert [m.content for m in queue.peek_messages(max_messages=32)][1] == HOSTILE
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_test_id("clear").click()
        expect(page.get_by_role("status")).to_contain_text("Queue cleared")
        assert queue.peek_messages(max_messages=32) == []
        service.delete_queue(name)
