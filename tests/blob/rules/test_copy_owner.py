"""Which pending copies are known to be dead (``rules.copies``): by their heartbeat, and at once
when the server process that owns one is a process of this machine that has ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from tabulae.blob.rules import copies
from tabulae.model.blobs import BlobRecord
from tabulae.model.edm import TICKS_PER_SECOND
from tabulae.storage.blobs import decode_blob, encode_blob

NOW = 1_000_000 * TICKS_PER_SECOND
SILENT = int((copies.STALE_SECONDS + 1) * TICKS_PER_SECOND)


def ended_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_copy_owned_by_an_ended_process_of_this_machine_is_stale_at_once() -> None:
    copy = copies.pending("id", "http://source/x", 10, NOW, f"{copies.HOST}:{ended_pid()}")
    assert copies.is_stale(copy, NOW)
    assert copies.check_no_pending(copy, NOW) is None  # a new copy may start over it


def test_a_copy_owned_by_a_process_that_ended_but_is_not_yet_reaped_is_stale_at_once() -> None:
    """A killed server's workers stay zombies until the system's init collects them; a server
    restarted meanwhile must still see their copies as dead."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        stat = Path(f"/proc/{child.pid}/stat")
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            time.sleep(0.01)  # it ends by itself; nobody waits for it yet
        copy = copies.pending("id", "http://source/x", 10, NOW, f"{copies.HOST}:{child.pid}")
        assert copies.is_stale(copy, NOW)
    finally:
        child.wait()


def test_a_copy_owned_by_a_running_process_or_elsewhere_waits_for_its_heartbeat() -> None:
    for owner in (f"{copies.HOST}:{os.getpid()}", f"another-{copies.HOST}:{ended_pid()}", None, "garbled"):
        copy = copies.pending("id", "http://source/x", 10, NOW, owner)
        assert not copies.is_stale(copy, NOW), owner
        assert copies.is_stale(copy, NOW + SILENT), owner


def test_an_ended_copy_forgets_its_owner() -> None:
    copy = copies.pending("id", "http://source/x", 10, NOW, f"{copies.HOST}:{ended_pid()}")
    assert copies.finished(copy, 10, NOW).owner is None
    failed = copies.ended(copy, copies.FAILED, NOW, copies.INTERRUPTED)
    assert failed.owner is None and not copies.is_stale(failed, NOW)


def test_the_owner_is_stored_with_the_copy_and_older_records_read_without_one() -> None:
    record = BlobRecord("b", "", "BlockBlob", 0, NOW, NOW)
    owned = replace(record, copy=copies.pending("id", "http://source/x", 10, NOW, "host:42"))
    assert decode_blob("b", "", NOW, 0, True, encode_blob(owned)).copy == owned.copy
    unowned = replace(record, copy=copies.pending("id", "http://source/x", 10, NOW))
    assert decode_blob("b", "", NOW, 0, True, encode_blob(unowned)).copy == unowned.copy


def test_this_process_names_its_host_with_its_process_id_namespace() -> None:
    """Two containers may share a host name but not their process ids: a process id of another
    namespace under the same name is not judged, only the heartbeat decides for it."""
    assert copies.this_process() == f"{copies.HOST}:{os.getpid()}"
    if os.path.exists("/proc/self/ns/pid"):
        elsewhere = f"{copies.HOST.split('/')[0]}/1:{ended_pid()}"
        assert not copies.is_stale(copies.pending("id", "http://source/x", 10, NOW, elsewhere), NOW)
