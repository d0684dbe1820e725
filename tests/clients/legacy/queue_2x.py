"""Queue operations through the legacy azure-storage-queue 2.1.0 (QueueService; x-ms-version
2018-03-28), run by tests/clients/test_legacy_python_sdks.py. argv: the Queue endpoint, a name."""

import datetime
import sys

from azure.storage.common.models import AccessPolicy
from azure.storage.queue import QueueMessageFormat, QueuePermissions, QueueService

ENDPOINT, NAME = sys.argv[1], sys.argv[2]
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SOON = datetime.datetime.utcnow() + datetime.timedelta(hours=1)
queues = QueueService(
    connection_string=f"AccountName=devstoreaccount1;AccountKey={KEY};QueueEndpoint={ENDPOINT};"
)
queues.retry = lambda context: None
q = NAME
assert queues.create_queue(q, metadata={"a": "b"}, fail_on_exist=True)
assert not queues.create_queue(q, metadata={"a": "b"})
assert [x.name for x in queues.list_queues(prefix=q, include_metadata=True)] == [q]
queues.put_message(q, "hello")
queues.put_message(q, "<a>&amp;</a>", time_to_live=-1)
assert [m.content for m in queues.peek_messages(q, num_messages=5)] == ["hello", "<a>&amp;</a>"]
first = queues.get_messages(q, num_messages=1, visibility_timeout=30)[0]
assert (first.content, first.dequeue_count) == ("hello", 1)
updated = queues.update_message(q, first.id, first.pop_receipt, 0, content="changed")
assert updated.pop_receipt and updated.time_next_visible
received = queues.get_messages(q, num_messages=32)
assert sorted(m.content for m in received) == ["<a>&amp;</a>", "changed"]
for message in received:
    queues.delete_message(q, message.id, message.pop_receipt)
assert queues.get_queue_metadata(q).approximate_message_count == 0
queues.set_queue_acl(q, {"pol": AccessPolicy(QueuePermissions.READ + QueuePermissions.ADD, expiry=SOON)})
token = queues.generate_queue_shared_access_signature(q, id="pol")
by_sas = QueueService(connection_string=f"QueueEndpoint={ENDPOINT};SharedAccessSignature={token}")
by_sas.put_message(q, "by sas")
queues.encode_function, queues.decode_function = (
    QueueMessageFormat.text_base64encode,
    QueueMessageFormat.text_base64decode,
)
queues.put_message(q, "base64 ü")
assert [m.content for m in by_sas.peek_messages(q, 32)][-1] == "YmFzZTY0IMO8"
queues.clear_messages(q)
assert queues.get_messages(q) == []
assert queues.delete_queue(q, fail_not_exist=True)
assert not queues.exists(q)
print("ok")
