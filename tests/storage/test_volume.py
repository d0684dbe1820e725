"""The data volume's state as the workers of one server share it (issue 36): a write one worker
ran out on is refused by all at once, the reserve is released once and taken back once, and each
change of state is logged once for the server, not once per worker. Two ``Volume`` objects over one
directory stand for two workers; the volume is a real one (this machine's temporary directory)."""

from __future__ import annotations

import errno
import logging
import sqlite3
from pathlib import Path

import pytest

from tabulae.storage.volume import MIB, RESERVE_NAME, Volume


def _workers(tmp_path: Path, reserve: int = 2 * MIB) -> tuple[Volume, Volume]:
    data, shared = tmp_path / "data", tmp_path / "shared"
    data.mkdir()
    shared.mkdir()
    first, second = (Volume(data, reserve_bytes=reserve, warn_bytes=0, shared_dir=shared) for _ in range(2))
    first.start()
    second.start()
    return first, second


def test_a_full_volume_is_seen_by_every_worker_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = _workers(tmp_path)
    reserve = tmp_path / "data" / RESERVE_NAME
    assert reserve.stat().st_size == 2 * MIB and not first.full and not second.full
    with caplog.at_level(logging.WARNING, logger="tabulae"):
        first.hit_full(OSError(errno.ENOSPC, "No space left on device"))
        assert second.full  # at once, not at its next look
        second.hit_full("database or disk is full")  # its own write ran out too: nothing more to say
        assert not reserve.exists()
        second.refresh()  # this machine's volume has room: the reserve is taken back
        assert not first.full and not second.full
        first.refresh()
    said = [record.getMessage() for record in caplog.records]
    assert [line.split(":")[0] for line in said] == ["data volume full", "space available again"], said
    assert reserve.stat().st_size == 2 * MIB


def test_what_counts_as_a_full_volume(tmp_path: Path) -> None:
    volume = Volume(tmp_path)
    assert volume.is_full_error(OSError(errno.ENOSPC, "No space left on device"))
    assert volume.is_full_error(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not volume.is_full_error(OSError(errno.EIO, "Input/output error"))
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # type: ignore[attr-defined]
    assert volume.is_full_error(full)
    io_error = sqlite3.OperationalError("disk I/O error")
    io_error.sqlite_errorcode = 10  # type: ignore[attr-defined]
    assert not volume.is_full_error(io_error)  # this volume has room: a real I/O error
