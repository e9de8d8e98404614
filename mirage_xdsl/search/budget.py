"""When a search must stop: its deadline, a signal, a lost worker; and how
a budget is split.

A search stopped for any of these returns the best verified µGraph found so
far. :class:`Stop` holds why it stopped; SIGINT and SIGTERM set it (a second
one aborts), as does a worker process that dies (``pool.py``).

A search keeps part of its budget (:func:`reserve`) to verify and time
what it found: generation ends early enough for that. Timing a candidate
tunes its kernels, which can take longer than everything before it; past
the search's deadline (:func:`timing_until`) the tuner gives a kernel it
has no choice for its default settings instead (``runtime/autotune.py``).
A program cut into segments gives each segment's search a share of its
budget by the work it is estimated to need, with a floor (:class:`Shares`).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

_TIMING_DEADLINE: ContextVar[float] = ContextVar("timing_deadline", default=math.inf)


@contextmanager
def timing_until(deadline: float) -> Iterator[None]:
    """Time candidates within ``deadline`` (a ``time.monotonic()`` value):
    what tunes their kernels asks :func:`past_timing_deadline`."""
    token = _TIMING_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _TIMING_DEADLINE.reset(token)


def timing_deadline() -> float:
    """The deadline of the candidate being timed (``time.monotonic()``;
    infinite outside :func:`timing_until`)."""
    return _TIMING_DEADLINE.get()


def past_timing_deadline() -> bool:
    """Whether the candidate being timed is timed past its search's deadline."""
    return time.monotonic() > timing_deadline()


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


RESERVE = 0.15
"""The part of a search's budget kept, when the cost model decides, for
verifying what generation found: generation stops when the rest is spent."""

MEASURED_RESERVE = 0.4
"""The same when a GPU decides: verifying, then compiling and timing the
input and up to ``measure_top`` candidates (about a second each with both
backends, more when Triton tunes)."""


def reserve(measure: object | None) -> float:
    """The fraction of a search's budget kept for choosing its result."""
    return RESERVE if measure is None else MEASURED_RESERVE


FLOOR = 0.5
"""Each segment's guaranteed share of a whole program's budget, as a fraction
of an even split: a segment estimated to need little still gets it."""

MIN_SECONDS = 0.5
"""The least budget one search gets, when the program's time is spent."""


def weights(works: Sequence[float]) -> list[float]:
    """Shares of a budget proportional to ``works``, each at least
    :data:`FLOOR` of an even split, summing to one."""
    n = len(works)
    total = sum(works)
    raw = [w / total if total > 0 else 1.0 / n for w in works]
    floored = [max(r, FLOOR / n) for r in raw]
    return [f / sum(floored) for f in floored]


def search_order(shares: Sequence[float]) -> list[int]:
    """The order segments with these shares are searched in: the largest
    first (program order among equal ones). Timing a segment's candidates
    can overrun its share, and an overrun comes off the searches after it:
    so the segments worth the most searching (an LM head, an attention) get
    their shares, and the small ones, whose fixed cost of timing their
    input overruns a share of a second or two whatever the order, come last."""
    return sorted(range(len(shares)), key=lambda i: -shares[i])


@dataclass(frozen=True)
class Shares:
    """A program's budget split among its segments' searches by weight.

    A search's share is the time left times its weight over the weights of
    the searches still to run: what :func:`weights` guaranteed it when the
    earlier searches kept to theirs, more when they finished early. A
    search that overruns takes from the later ones in proportion, never all
    of one's time."""

    deadline: float
    weights: tuple[float, ...]
    total: float | None = None
    """The whole budget in seconds, which :meth:`guaranteed` splits."""

    def guaranteed(self, i: int) -> float | None:
        """Seconds search ``i`` gets when every search keeps to its own
        share (None where the total is not known). A run whose earlier
        searches come from the cache gives the later ones more than that,
        so a search its budget stopped answers them from the cache if it
        was guaranteed this much (``superoptimize_function``'s
        ``served_by``)."""
        if self.total is None:
            return None
        return max(self.total * self.weights[i], MIN_SECONDS)

    def share(self, i: int) -> float:
        """Seconds for search ``i``, from now."""
        left = max(self.deadline - time.monotonic(), 0.0)
        rest = sum(self.weights[i:])
        share = left * self.weights[i] / rest if rest > 0 else left
        return max(share, MIN_SECONDS)
