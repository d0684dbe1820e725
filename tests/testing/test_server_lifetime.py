"""A server started by ``tabulae.testing`` does not outlive the process that started it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's"
)
def test_a_server_stops_when_its_starter_is_killed(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from tabulae.testing.server import start
        server = start(Path({str(tmp_path)!r}))
        print(server.process.pid, flush=True)
        time.sleep(120)
        """
    )
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    server_pid = int(starter.stdout.readline())
    os.kill(server_pid, 0)  # running
    starter.kill()  # SIGKILL: the starter cannot stop the server itself
    starter.communicate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(server_pid, 9)
    pytest.fail("the server outlived the process that started it")
