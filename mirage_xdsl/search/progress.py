"""A one-line progress display on stderr, shown only on a terminal.

A program searched segment by segment sets :attr:`Progress.stage` to the
segment and its share of the budget; each line then starts with it, followed
by the search's own counts and the best cost so far."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.start = time.monotonic()
        self.stage = ""
        """What part of a larger search runs now (a segment), or empty."""
        self._last = 0.0
        self._width = 0

    def update(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        stage = f"{self.stage}: " if self.stage else ""
        line = f"superoptimize [{now - self.start:6.1f} s] {stage}{text}"
        pad = max(self._width - len(line), 0)
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
