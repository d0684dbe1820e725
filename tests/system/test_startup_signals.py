"""A stop signal that arrives while the server is still starting.

Until a server takes SIGTERM and SIGINT over, their handler raises ``SystemExit`` wherever the
interpreter is. Where that is a weakref callback (or a ``__del__``), Python reports the exception
as ignored and goes on: start-up continued and the server served until it was killed (a test's
stop waited its whole 15 s timeout). The request is kept, and the server that takes over stops.
"""

from __future__ import annotations

import gc
import signal
import weakref

import pytest

from tabulae import compose


class _Thing:
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed exit itself
def test_a_stop_signal_swallowed_during_start_up_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compose, "_stop_asked", False)
    thing = _Thing()
    kept = weakref.ref(thing, lambda _: compose._exit_now(signal.SIGTERM, None))
    del thing  # the callback runs now; Python reports its SystemExit as ignored
    gc.collect()
    assert kept() is None
    assert compose._stop_asked
