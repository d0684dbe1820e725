"""Disk trouble (issue #7): a full disk, a file-size limit and a file system that turns read-only.

In each case a running server with acknowledged data loses the ability to write. Then:

* every write (insert, upsert, batch, create table) that fails, fails with a 5xx JSON Azure error
  (``{"odata.error":…}``, ``x-ms-error-code`` equal to the code; 500/503 are what SDKs retry),
  never a 4xx, a hang or a dead process;
* reads keep working and still return every acknowledged entity with its ETag;
* once space is back the very next writes succeed, without a restart (disk full, file size);
* the store passes ``PRAGMA integrity_check`` after a graceful stop, and a restarted server
  serves every acknowledged entity with its ETag.

How the trouble is made (all of it works here, where tests run as root):

* **disk full**: the data directory is a 2 MiB tmpfs (``mount -t tmpfs -o size=2m``), filled to
  the last page with a filler file (writes then fail with ENOSPC); space returns when the filler
  is deleted. Where mounting is not permitted this test falls back to the file-size limit below.
* **file-size limit**: ``RLIMIT_FSIZE`` is lowered on the running server with ``prlimit(2)`` to
  the current size of its files (writes that would grow a file fail with EFBIG; Python ignores
  SIGXFSZ), and raised again afterwards. This needs no privileges.
* **read-only file system**: the data directory is an ext4 file system on a loop device, mounted
  with ``errors=remount-ro``; writing to ``/sys/fs/ext4/<dev>/trigger_fs_error`` makes the kernel
  remount it read-only under the running server, exactly as after a disk I/O error (EROFS). A
  tmpfs cannot be remounted read-only while SQLite holds files open for writing, and root
  ignores ``chmod``/``chattr`` on open files, hence the loop device. Recovery is the
  administrator's: stop, unmount, ``e2fsck``, mount, start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.rawhttp import RawClient, RawResponse, py_keys
from tests.system.test_reliability_support import (
    BatchOp,
    IsolatedServer,
    assert_retryable_server_error,
    entity_map,
    integrity_check,
    parse_batch_response,
    query_all,
    send_batch,
)

TABLE = "diskfull"


# --------------------------------------------------------------------------------------------
# Making trouble
# --------------------------------------------------------------------------------------------


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str) -> Iterator[bool]:
    """Mount a tmpfs of ``size`` on ``path``; yields False (and mounts nothing) if not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    result = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield result.returncode == 0
    finally:
        if result.returncode == 0 and _run("umount", str(path)).returncode != 0:
            _run("umount", "-l", str(path))


def fill_disk(directory: Path) -> Path:
    """Write a filler file until the file system has no page left; return its path."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 20, 1 << 16, 4096, 512, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written = os.write(fd, block)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EFBIG):
                        raise
                    break
                if written < chunk:
                    break
    finally:
        os.close(fd)
    return filler


def _file_sizes(directory: Path) -> int:
    """The largest of the store's files (the full-volume reserve, preallocated, is not one)."""
    sizes = (
        entry.stat().st_size
        for entry in directory.iterdir()
        if entry.is_file() and "reserve" not in entry.name
    )
    return max(sizes, default=0)


def limit_file_size(pids: list[int], limit: int) -> Callable[[], None]:
    """Lower RLIMIT_FSIZE of running processes; return the function that restores it."""
    previous = {pid: resource.prlimit(pid, resource.RLIMIT_FSIZE) for pid in pids}
    for pid, (_soft, hard) in previous.items():
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))

    def restore() -> None:
        for pid, limits in previous.items():
            resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)

    return restore


# --------------------------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------------------------


class Ledger:
    """Acknowledged entities: (PartitionKey, RowKey) → (ETag, user properties)."""

    def __init__(self) -> None:
        self.acked: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def insert(self, raw: RawClient, pk: str, rk: str, pad: int) -> RawResponse:
        props = {"pad": "d" * pad, "n": len(self.acked)}
        response = raw.insert(TABLE, {"PartitionKey": pk, "RowKey": rk, **props})
        if response.status == 201:
            self.acked[(pk, rk)] = (response.header("etag") or "", props)
        return response

    def upsert(self, raw: RawClient, pk: str, rk: str, pad: int) -> RawResponse:
        props = {"pad": "u" * pad, "n": -len(self.acked)}
        response = raw.request("PUT", TABLE + py_keys(pk, rk), props)
        if response.status == 204:
            self.acked[(pk, rk)] = (response.header("etag") or "", props)
        return response

    def batch(self, raw: RawClient, pk: str, rows: list[str], pad: int) -> RawResponse:
        entities = [{"PartitionKey": pk, "RowKey": rk, "pad": "b" * pad, "n": i} for i, rk in enumerate(rows)]
        response = send_batch(raw, [BatchOp("POST", TABLE, {}, entity) for entity in entities])
        if response.status == 202:
            parts = parse_batch_response(response)
            if [part.status for part in parts] == [201] * len(rows):
                for entity, part in zip(entities, parts, strict=True):
                    props = {"pad": entity["pad"], "n": entity["n"]}
                    self.acked[(pk, entity["RowKey"])] = (part.headers["etag"], props)
        return response

    def check(self, raw: RawClient) -> None:
        found = entity_map(query_all(raw, TABLE))
        missing = {key: value for key, value in self.acked.items() if found.get(key) != value}
        assert missing == {}, f"{len(missing)} acknowledged entities missing or changed: {list(missing)[:5]}"


@dataclass
class Outcome:
    """What happened while writes were impossible."""

    ledger: Ledger
    codes: list[str]  # the error codes of the writes that failed (each a retryable 5xx)
    batches_in_202: list[str]  # batches that failed inside a 202 instead of as a 5xx

    def assert_failures_were_retryable(self) -> None:
        assert self.batches_in_202 == [], (
            f"{len(self.batches_in_202)} batches that could not be written were answered 202 (SDKs raise "
            "TableTransactionError and do not retry) instead of a top-level 5xx: " + self.batches_in_202[0]
        )
        assert self.codes, "no single write failed while the store could not write"


def _failed_write(response: RawResponse, failures: list[str]) -> None:
    """A write that did not succeed must be a retryable 5xx Azure error (and nothing else)."""
    failures.append(assert_retryable_server_error(response))


def exercise_lost_writes(
    server: IsolatedServer, make_trouble: Callable[[], None], end_trouble: Callable[[], None] | None
) -> Outcome:
    """Acknowledge some data, make writes impossible, check errors and reads, end the trouble
    (when it can end while running) and check that writes work again."""
    raw = server.raw()
    assert raw.create_table(TABLE).status == 201
    ledger = Ledger()
    for i in range(20):
        assert ledger.insert(raw, "before", f"r{i:03d}", 500).status == 201
    ledger.check(raw)

    make_trouble()
    codes: list[str] = []
    batches_in_202: list[str] = []
    for i in range(24):
        kind = i % 4
        if kind == 0:
            response = ledger.insert(raw, "during", f"i{i:03d}", 8000)
            ok = response.status == 201
        elif kind == 1:
            response = ledger.upsert(raw, "before", f"r{i:03d}", 8000)
            ok = response.status == 204
        elif kind == 2:
            response = ledger.batch(raw, f"batch{i}", [f"x{j}" for j in range(5)], 6000)
            ok = response.status == 202 and all(p.status == 201 for p in parse_batch_response(response))
        else:
            response = raw.create_table(f"during{i}")
            ok = response.status == 201
        if not ok:
            if response.status == 202:
                # A batch the store could not commit is a server failure, not an operation's: it
                # must be a top-level 5xx, which SDKs retry, not a 202 holding a failed part.
                parts = parse_batch_response(response)
                assert len(parts) == 1 and parts[0].status >= 500, response
                batches_in_202.append(f"202 with a {parts[0].status} part: {parts[0].body[:160]!r}")
            else:
                _failed_write(response, codes)
    assert codes or batches_in_202, "no write failed although the server could not write"
    assert server.alive(), f"the server died: {server.log_tail()}"

    # Reads keep working, and acknowledged data is intact.
    for i in range(0, 20, 5):
        response = raw.get_entity(TABLE, "before", f"r{i:03d}")
        assert response.status == 200, response
        assert response.header("etag") == ledger.acked[("before", f"r{i:03d}")][0]
    ledger.check(raw)
    assert raw.request("GET", "Tables").status == 200

    if end_trouble is not None:
        end_trouble()
        assert ledger.insert(raw, "after", "first", 100).status == 201, "no recovery once space returned"
        response = ledger.batch(raw, "after", ["b0", "b1", "b2"], 100)
        assert [p.status for p in parse_batch_response(response)] == [201, 201, 201], response
        etag = ledger.acked[("before", "r000")][0]
        response = raw.request("PUT", TABLE + py_keys("before", "r000"), {"v": 1}, {"If-Match": etag})
        assert response.status == 204, response
        ledger.acked[("before", "r000")] = (response.header("etag") or "", {"v": 1})
        assert raw.create_table("aftertrouble").status == 201
        ledger.check(raw)
    return Outcome(ledger, codes, batches_in_202)


def restart_and_check(server: IsolatedServer, ledger: Ledger) -> None:
    server.stop()
    assert integrity_check(server.data_dir / "tabulae.db") == "ok"
    server.start()
    ledger.check(server.raw())
    assert ledger.insert(server.raw(), "restarted", "r", 10).status == 201
    server.stop()


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_disk_full_fails_writes_with_retryable_azure_errors_and_recovers(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with mounted_tmpfs(disk, "2m") as is_tmpfs:
        server = IsolatedServer(disk / "data", ["--workers", "1"], log_path=tmp_path / "server.log")
        server.start()
        try:
            if is_tmpfs:
                fillers: list[Path] = []
                outcome = exercise_lost_writes(
                    server,
                    lambda: fillers.append(fill_disk(disk)),
                    lambda: fillers.pop().unlink(),
                )
            else:  # mount not permitted: a file-size limit instead (see the module docstring)
                restore: list[Callable[[], None]] = []
                outcome = exercise_lost_writes(
                    server,
                    lambda: restore.append(limit_file_size(server.worker_pids(), _file_sizes(disk / "data"))),
                    lambda: restore.pop()(),
                )
            restart_and_check(server, outcome.ledger)
        finally:
            server.kill()
    outcome.assert_failures_were_retryable()


@pytest.mark.timeout(90)
def test_file_size_limit_fails_writes_with_retryable_azure_errors_and_recovers(tmp_path: Path) -> None:
    server = IsolatedServer(tmp_path / "data", ["--workers", "1"], log_path=tmp_path / "server.log")
    server.start()
    try:
        restore: list[Callable[[], None]] = []

        def limit() -> None:
            restore.append(limit_file_size(server.worker_pids(), _file_sizes(tmp_path / "data")))

        outcome = exercise_lost_writes(server, limit, lambda: restore.pop()())
        restart_and_check(server, outcome.ledger)
    finally:
        server.kill()
    outcome.assert_failures_were_retryable()


@contextlib.contextmanager
def ext4_on_loop(image: Path, mountpoint: Path) -> Iterator[str]:
    """An 32 MiB ext4 file system on a loop device, mounted with errors=remount-ro; yields the
    device name (``loopN``)."""
    with open(image, "wb") as handle:
        handle.truncate(32 << 20)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    assert made.returncode == 0, made.stderr
    attached = _run("losetup", "-f", "--show", str(image))
    assert attached.returncode == 0, f"losetup (needs root): {attached.stderr}"
    device = attached.stdout.strip()
    mountpoint.mkdir(parents=True, exist_ok=True)
    try:
        mounted = _run("mount", "-o", "errors=remount-ro", device, str(mountpoint))
        assert mounted.returncode == 0, f"mount (needs root): {mounted.stderr}"
        yield device
    finally:
        if _run("umount", str(mountpoint)).returncode != 0:
            _run("umount", "-l", str(mountpoint))
        _run("losetup", "-d", device)


@pytest.mark.timeout(90)
def test_read_only_file_system_fails_writes_with_azure_errors_and_corrupts_nothing(tmp_path: Path) -> None:
    mountpoint = tmp_path / "ext4"
    with ext4_on_loop(tmp_path / "ext4.img", mountpoint) as device:
        server = IsolatedServer(mountpoint / "data", ["--workers", "1"], log_path=tmp_path / "server.log")
        server.start()
        trigger = Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error"
        try:

            def go_read_only() -> None:
                trigger.write_text("tabulae reliability test\n")
                probe = mountpoint / "probe"
                with pytest.raises(OSError) as raised:
                    probe.write_text("x")
                assert raised.value.errno == errno.EROFS

            outcome = exercise_lost_writes(server, go_read_only, None)
            server.stop()
        finally:
            server.kill()
        # The administrator's recovery: unmount, check the file system, mount it again.
        assert _run("umount", str(mountpoint)).returncode == 0
        fsck = _run("e2fsck", "-f", "-y", device)
        assert fsck.returncode in (0, 1), fsck.stdout + fsck.stderr
        assert _run("mount", device, str(mountpoint)).returncode == 0
        assert integrity_check(mountpoint / "data" / "tabulae.db") == "ok"
        server.start()
        try:
            outcome.ledger.check(server.raw())
            assert outcome.ledger.insert(server.raw(), "recovered", "r", 10).status == 201
            server.stop()
        finally:
            server.kill()
        assert integrity_check(mountpoint / "data" / "tabulae.db") == "ok"
    outcome.assert_failures_were_retryable()
