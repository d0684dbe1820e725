"""The in-memory directory a multi-worker server shares counters through: a server killed with
``kill -9`` cannot remove its own, so the next server to start removes it, and never one whose
server still runs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.serverproc import ServerProcess


def peers_dir(server: ServerProcess) -> Path:
    """The directory whose ``owner.lock`` the server's parent process holds open."""
    assert server.process is not None
    fds = Path(f"/proc/{server.process.pid}/fd")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for fd in fds.iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.endswith("/owner.lock") and "/tabulae-" in target:
                return Path(target).parent
        time.sleep(0.05)
    raise AssertionError("the server holds no peers directory lock")


def backdate(path: Path) -> None:
    """Older than the sweep's settling time, as a directory left from an earlier run would be."""
    old = time.time() - 3600
    os.utime(path, (old, old))


def test_a_killed_servers_directory_is_removed_by_the_next_and_a_live_ones_kept(tmp_path: Path) -> None:
    killed = ServerProcess(tmp_path / "killed", extra_args=["--workers", "2"]).start()
    left = peers_dir(killed)
    killed.stop(signal.SIGKILL)
    assert left.is_dir()  # nobody could remove it
    backdate(left)

    alive = ServerProcess(tmp_path / "alive", extra_args=["--workers", "2"]).start()
    try:
        kept = peers_dir(alive)
        backdate(kept)
        assert not left.exists()
        newer = ServerProcess(tmp_path / "newer", extra_args=["--workers", "2"]).start()
        try:
            assert kept.is_dir()  # its server still runs
            assert peers_dir(newer) != kept
        finally:
            newer.stop()
    finally:
        alive.stop()
    assert not kept.exists()  # a server that stops cleanly removes its own
