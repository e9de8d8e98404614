"""How a kernel's for-loop is written in Triton: unrolled, or left to Triton.

A short for-loop without a matmul whose tiles of every iteration fit in
registers together (``search.cost_model.unrolled``) is a ``tl.static_range``:
Triton pipelines no loads that feed no ``tl.dot``, so its loads are in flight
at once only unrolled. Unrolling costs compile time, though, and measured
selection compiles every candidate it times. On the H100 and its host, timing
the candidates of a batch-8 decode attention over 4096 keys as measured
selection does (``GpuMeasure``: build, tune, time):

| program, its loop | unrolled | ``loop_unroll_factor=8`` | ``range`` |
| --- | ---: | ---: | ---: |
| b8 attention, combine of 64 parts | 40.7 µs, 20.9 s | 43.3 µs, 2.6 s | 45.2 µs, 2.1 s |
| b8 attention, combine of 32 parts | 34.1 µs, 9.0 s | 35.5 µs, 3.8 s | 35.1 µs, 3.4 s |
| b1 attention (512 keys), 8 parts | 4.74 µs, 3.2 s | 4.83 µs, 2.0 s | 4.82 µs, 1.9 s |
| o projection, 4 parts | 7.68 µs, 4.7 s | 7.71 µs, 2.8 s | 8.08 µs, 2.6 s |
| down projection, 4 parts | 18.32 µs, 4.3 s | 18.26 µs, 2.2 s | 18.24 µs, 2.5 s |

(``docs/bench/loop_forms_h100.json``; the b1 programs are a 1B decode
layer's segments.) So measured selection times its candidates with such
loops unrolled :data:`ROLLED_UNROLL` iterations at a time
(:func:`rolled_loops`), up to 6% slower and several times quicker to
compile, and the program built to run unrolls them in full.

A loop left rolled that has no ``tl.dot`` loads its tiles one iteration
ahead (:func:`loads_ahead`, :func:`ahead_mask`): the first iteration's tiles
are loaded before the loop, and each iteration loads the next one's before
it uses its own, held in registers across the iteration. So two iterations'
loads are in flight, not one. A tile of a program input (a weight, which no
kernel writes) is loaded first before the wait for the kernel ahead
(``gdc_wait()``): a kernel launched programmatically has its first weight
tiles on the way while the kernel ahead still runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ROLLED_UNROLL = 8
"""Iterations a loop that would be unrolled is unrolled by within
:func:`rolled_loops` (Triton's ``loop_unroll_factor``)."""

LOADS_AHEAD = True
"""Whether a rolled loop without ``tl.dot`` loads its tiles one iteration
ahead (read when a kernel is printed)."""

AHEAD_ELEMENTS = 1 << 14
"""Most elements a block loads per iteration for its loop to load ahead:
the tiles are held twice, and 16K elements over 8 warps are 64 a thread."""

_ROLLED: ContextVar[bool] = ContextVar("rolled_loops", default=False)


@contextmanager
def rolled_loops() -> Iterator[None]:
    """Within this, a loop the printer would unroll is a ``tl.range``
    unrolled :data:`ROLLED_UNROLL` iterations at a time: what measured
    selection times its candidates with."""
    token = _ROLLED.set(True)
    try:
        yield
    finally:
        _ROLLED.reset(token)


def loop_range(iterations: int, unrolled: bool) -> str:
    """The iterable a for-loop of ``iterations`` walks: ``tl.static_range``
    where it is ``unrolled`` (partly, within :func:`rolled_loops`), else a
    plain ``range`` for Triton to pipeline."""
    if not unrolled:
        return f"range(0, {iterations})"
    if _ROLLED.get():
        factor = min(iterations, ROLLED_UNROLL)
        return f"tl.range(0, {iterations}, loop_unroll_factor={factor})"
    return f"tl.static_range(0, {iterations})"


def loads_ahead(iterations: int, loop_elements: int) -> bool:
    """Whether a rolled loop without ``tl.dot`` of ``iterations`` that loads
    ``loop_elements`` per iteration loads them one iteration ahead."""
    return LOADS_AHEAD and iterations > 1 and loop_elements <= AHEAD_ELEMENTS


def ahead_mask(mask: str | None, iterations: int) -> str:
    """The mask of a tile's load for the next iteration: ``mask`` (its
    padding) and, on the last iteration, nothing (no next tile to load)."""
    last = f"(it + 1 < {iterations})"
    return f"{mask} & {last}" if mask else last
