"""Stores made before ``auto_vacuum = INCREMENTAL`` (issue 36): a small one is converted at
start-up, so that deletes give space back to the volume; a large one is left alone with one line
saying how to convert it, which ``tabulae db vacuum`` does."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tabulae.storage.sqlite import check_store
from tabulae.storage.sqlite import vacuum as vacuum_module
from tabulae.storage.sqlite.vacuum import INCREMENTAL
from tests.system.test_reliability_support import ROOT

MIB = 1024 * 1024


def _old_store(directory: Path) -> Path:
    """A store as an older version made it (``auto_vacuum = NONE``), with 8 MiB written and
    deleted again: its file keeps the freed pages."""
    check_store(directory)
    path = directory / "tabulae.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
        conn.execute("CREATE TABLE pad (data BLOB)")
        conn.executemany("INSERT INTO pad VALUES (?)", [(os.urandom(64 * 1024),) for _ in range(128)])
        conn.execute("DELETE FROM pad")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    assert path.stat().st_size >= 8 * MIB  # the deleted pages stay in the file
    return path


def _auto_vacuum(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])
    finally:
        conn.close()


def test_a_small_older_store_is_converted_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _old_store(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tabulae"):
        check_store(tmp_path)
        check_store(tmp_path)  # converted already: nothing more to do or say
    assert _auto_vacuum(path) == INCREMENTAL
    assert path.stat().st_size < 2 * MIB  # the freed pages went back to the volume
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and "was converted to give freed space back" in said[0], said


def test_a_large_older_store_is_left_with_one_line_saying_how_and_db_vacuum_converts_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _old_store(tmp_path)
    monkeypatch.setattr(vacuum_module, "CONVERT_BELOW_BYTES", 4 * MIB)
    with caplog.at_level(logging.WARNING, logger="tabulae"):
        check_store(tmp_path)
    assert _auto_vacuum(path) == 0
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 1 and f"tabulae db vacuum --data-dir {tmp_path}" in said[0], said

    def db_vacuum(data_dir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tabulae", "db", "vacuum", "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )

    done = db_vacuum(tmp_path)
    assert done.returncode == 0, done
    assert done.stdout.startswith(f"rewrote {path} in ") and "now 0 MiB" in done.stdout, done.stdout
    assert _auto_vacuum(path) == INCREMENTAL
    assert path.stat().st_size < 2 * MIB
    missing = db_vacuum(tmp_path / "nothing")
    assert missing.returncode != 0 and "StoreNotFound" in missing.stderr, missing
