"""The GPU timer: calls captured in a CUDA graph, L2 flushed before every call,
the flushes' own time subtracted, the median over repetitions kept; a timer
that has been idle keeps the GPU busy for a moment before timing again.

Every GPU timing of the project goes through it: the search's measured
selection, the Triton autotuner and ``tools/bench.py``, so their figures agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

BATCH = 20
"""Calls captured in one CUDA graph for the headline figure."""
FLUSH_BYTES = 256 << 20
IDLE_SECONDS = 1.0
"""A timer unused for this long first keeps the GPU busy for
:data:`SPIN_SECONDS` before it times anything."""
SPIN_SECONDS = 0.1


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
        self._last_used: float | None = None

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

    def _median_us(self, graph) -> float:
        torch = self.torch
        for _ in range(self.warmup):
            graph.replay()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(self.reps)
        ]
        for start, end in events:
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1000.0 for s, e in events)
        return times[len(times) // 2]

    def per_call_us(self, calls: Sequence[Callable[[], object]], count: int) -> float:
        """Median µs per call of ``count`` calls in one graph (``calls`` taken
        in turn, e.g. one per input set), each after an L2 flush; a graph of
        the flushes alone is timed and subtracted."""

        now = time.monotonic()
        if self._last_used is None or now - self._last_used > IDLE_SECONDS:
            self.spin_up()

        def flushes():
            for _ in range(count):
                self.flush_buffer.fill_(1)

        def body():
            for i in range(count):
                self.flush_buffer.fill_(1)
                calls[i % len(calls)]()

        total = self._median_us(capture_graph(body))
        flush = self._median_us(capture_graph(flushes))
        self._last_used = time.monotonic()
        return max(total - flush, 0.0) / count
