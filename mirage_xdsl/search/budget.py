"""When a search must stop: its deadline, a signal, a lost worker.

A search stopped for any of these returns the best verified µGraph found so
far. :class:`Stop` holds why it stopped; SIGINT and SIGTERM set it (a second
one aborts), as does a worker process that dies (``pool.py``).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stop:
    """A stop request: the first signal asks for the best so far, a second aborts."""

    def __init__(self) -> None:
        self.reason = ""

    def __call__(self, signum: int, frame: object) -> None:
        if self.reason.startswith("SIG"):
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name

    def due(self, deadline: float) -> bool:
        """Whether the search must end now: asked to, or out of time."""
        return bool(self.reason) or time.monotonic() > deadline


@contextmanager
def signals(stop: Stop) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into a stop request (main thread only)."""
    try:
        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
