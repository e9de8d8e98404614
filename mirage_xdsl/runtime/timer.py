"""The GPU timer: calls captured in a CUDA graph, L2 flushed before every call,
the flushes' own time subtracted, the median over repetitions kept; a timer
that has been idle keeps the GPU busy for a moment before timing again.

Every GPU timing of the project goes through it: the search's measured
selection, the Triton autotuner and ``tools/bench.py``, so their figures agree.

A timing is a service of its GPU, one at a time, checked before it is given
out (:meth:`GraphTimer.per_call_us`):

- it holds the GPU's lock (``device_lock.py``), which every process of the
  host takes, so no two of our timings overlap;
- the graph of the calls and the graph of the flushes alone are replayed in
  turn, and each call's time is its replay minus the flushes' replay just
  before it, so a change of clocks or load affects both alike;
- the median must be positive and the spread of the repetitions bounded
  (p90/p10 at most :data:`MAX_SPREAD`, or within :data:`NOISE_US`);
- another process computing on the GPU (``gpu_activity.py``) is waited for.
  Where only the whole GPU's utilisation is known, it also counts this
  process's own work, so it is read only once this process has left the GPU
  idle for :data:`BUSY_WAIT`; between timings that follow each other, the
  checks above are what catches a disturbed figure.

What fails is measured again after :data:`BUSY_WAIT`, up to
:data:`ATTEMPTS` times; then :class:`Unreliable` is raised, naming why, and
the caller decides (the search's measure lets the cost model choose, with a
warning). No figure at or below zero is ever returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mirage_xdsl.runtime.device_lock import LockTimeout, device_key, device_lock
from mirage_xdsl.runtime.gpu_activity import Activity, activity

BATCH = 20
"""Calls captured in one CUDA graph for the headline figure."""
FLUSH_BYTES = 256 << 20
IDLE_SECONDS = 1.0
"""A timer unused for this long first keeps the GPU busy for
:data:`SPIN_SECONDS` before it times anything."""
SPIN_SECONDS = 0.1
ATTEMPTS = 3
"""Timings tried before :class:`Unreliable` is raised."""
BUSY_WAIT = 1.0
"""Seconds to wait before trying again (longer than the driver's
utilisation sampling window, so a whole-GPU figure read after it holds no
work of this process)."""
MAX_SPREAD = 2.0
"""Largest p90/p10 of the repetitions' per-call times accepted..."""
NOISE_US = 4.0
"""...unless p90 - p10 is at most this many µs: the jitter of two 256 MB
flushes (each repetition's figure is a difference of two replays), which
dominates the spread of a call of a few µs."""


_LAST_USE = [-float("inf")]
"""When this process last ran timed work on a GPU (monotonic seconds)."""


class Unreliable(RuntimeError):
    """No timing the checks accept: the GPU stayed busy with other work, or
    the figures stayed non-positive or too spread, :data:`ATTEMPTS` times."""


@dataclass(frozen=True)
class Sample:
    """One timing's per-call µs over the repetitions, flushes taken off."""

    median: float
    p10: float
    p90: float

    @staticmethod
    def of(per_call: Sequence[float]) -> Sample:
        xs = sorted(per_call)

        def at(q: float) -> float:
            return xs[min(len(xs) - 1, int(q * len(xs)))]

        return Sample(at(0.5), at(0.1), at(0.9))

    def problem(self) -> str:
        """Why the checks refuse it, or empty."""
        if self.median <= 0:
            return (
                f"the calls timed {self.median:.2f} us with the flushes taken off "
                "(the flushes alone took longer)"
            )
        spread = self.p90 / self.p10 if self.p10 > 0 else float("inf")
        if spread > MAX_SPREAD and self.p90 - self.p10 > NOISE_US:
            return (
                f"repetitions spread from {self.p10:.2f} to {self.p90:.2f} us "
                "(p10 to p90)"
            )
        return ""


def capture_graph(body, warmup: int = 1) -> Any:
    """A CUDA graph of ``body()``, run ``warmup`` times on a side stream first
    (lazy initialisation, autotuning and allocations stay out of the graph)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph


class GraphTimer:
    """CUDA-graph replays with the L2 flushed before each call."""

    def __init__(self, reps: int = 50, warmup: int = 5, device: str = "cuda"):
        import torch

        self.torch = torch
        self.reps = reps
        self.warmup = warmup
        self.flush_buffer = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
        self.key = device_key(self.flush_buffer.device.index or 0)
        """The GPU's name for its lock and for :func:`gpu_activity.activity`."""
        self._last_used: float | None = None
        self.last: Sample | None = None
        """The accepted sample of the last timing."""
        self.retried: list[str] = []
        """Why the last timing had to be tried again, one line per try."""
        self._whole_gpu = False
        """Whether the GPU's activity is known for the whole GPU only."""

    def spin_up(self, seconds: float = SPIN_SECONDS) -> None:
        """Keep the GPU busy (L2 flushes) for ``seconds``. After a pause, a
        GPU's clocks come up over its first milliseconds of work, so what is
        timed first after a long compilation would otherwise come out slow,
        and an autotuner would rank its first settings last."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(20):
                self.flush_buffer.fill_(1)
            self.torch.cuda.synchronize()
        _LAST_USE[0] = time.monotonic()

    def activity(self) -> Activity:
        return activity(self.key)

    def others_busy(self) -> str:
        """Why other processes keep the GPU busy, or empty (also when a
        whole-GPU figure would count this process's own recent work)."""
        recent = time.monotonic() - _LAST_USE[0] < BUSY_WAIT
        if recent and self._whole_gpu:
            return ""
        seen = self.activity()
        self._whole_gpu = seen.others is None
        return "" if recent and self._whole_gpu else seen.busy()

    def _paired_us(self, calls_graph, flush_graph, count: int) -> Sample:
        """Replay the flushes' graph and the calls' graph in turn; each
        repetition's per-call µs is the calls' replay minus the flushes'."""
        torch = self.torch
        for _ in range(self.warmup):
            flush_graph.replay()
            calls_graph.replay()
        marks = [
            [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            for _ in range(self.reps)
        ]
        for before, between, after in marks:
            before.record()
            flush_graph.replay()
            between.record()
            calls_graph.replay()
            after.record()
        torch.cuda.synchronize()
        return Sample.of(
            [
                (b.elapsed_time(c) - a.elapsed_time(b)) * 1000.0 / count
                for a, b, c in marks
            ]
        )

    def per_call_us(self, calls: Sequence[Callable[[], object]], count: int) -> float:
        """Median µs per call of ``count`` calls in one graph (``calls`` taken
        in turn, e.g. one per input set), each after an L2 flush, the time of
        a graph of the flushes alone taken off; checked as the module says,
        or :class:`Unreliable`."""

        def flushes():
            for _ in range(count):
                self.flush_buffer.fill_(1)

        def body():
            for i in range(count):
                self.flush_buffer.fill_(1)
                calls[i % len(calls)]()

        self.retried = []
        try:
            return self._checked_us(body, flushes, count)
        except LockTimeout as e:
            raise Unreliable(str(e)) from None

    def _checked_us(self, body, flushes, count: int) -> float:
        """:meth:`per_call_us` with the GPU's lock held."""
        with device_lock(self.key):
            calls_graph, flush_graph = capture_graph(body), capture_graph(flushes)
            for attempt in range(ATTEMPTS):
                if attempt:
                    time.sleep(BUSY_WAIT)
                busy = self.others_busy()
                if busy:
                    self.retried.append(busy)
                    continue
                now = time.monotonic()
                if self._last_used is None or now - self._last_used > IDLE_SECONDS:
                    self.spin_up()
                sample = self._paired_us(calls_graph, flush_graph, count)
                self._last_used = _LAST_USE[0] = time.monotonic()
                problem = sample.problem() or self.others_busy()
                if not problem:
                    self.last = sample
                    return sample.median
                self.retried.append(problem)
        raise Unreliable(
            f"GPU {self.key}: no reliable timing in {ATTEMPTS} attempts: "
            + "; ".join(dict.fromkeys(self.retried))
        )
