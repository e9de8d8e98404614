"""Reusable large arrays for the finite-field steps.

Every thread keeps one :class:`BufferPool` (:func:`pool`): the residue
arithmetic (``residue_arith.py``) takes its large intermediates from it, and
a verdict trims it once done (:meth:`BufferPool.trim`).
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np


class BufferPool:
    """Large arrays, reused once nothing refers to them any more.

    A fresh 100 MB array costs the kernel tens of milliseconds of page faults
    before numpy writes a byte, more than the arithmetic on it. A trial makes
    the same large intermediates for both programs and again for the next
    trial, so they are recycled: a buffer is free when only this pool holds it
    (every numpy view keeps its base alive, so a live view is never
    overwritten).
    """

    MIN_BYTES = 1 << 22
    KEEP_BYTES = 1 << 30
    """Free buffers kept between verdicts (:meth:`trim`)."""

    def __init__(self) -> None:
        self.buffers: list[np.ndarray] = [np.empty(0, np.uint8)]
        """The first is a sentinel nothing else refers to: its reference
        count, taken the same way, is what "free" looks like."""

    def _free_ones(self) -> list[np.ndarray]:
        free, baseline = [], None
        for buffer in self.buffers:
            refs = sys.getrefcount(buffer)
            if baseline is None:
                baseline = refs
            elif refs <= baseline:
                free.append(buffer)
        return free

    def empty(self, shape: Sequence[int], dtype: Any = np.float64) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < self.MIN_BYTES:
            return np.empty(shape, dtype)
        fits = [b for b in self._free_ones() if b.nbytes >= nbytes]
        if fits:
            best = min(fits, key=lambda b: b.nbytes)
        else:
            best = np.empty(nbytes, np.uint8)
            self.buffers.append(best)
        return best[:nbytes].view(dtype).reshape(shape)

    def trim(self) -> None:
        """Give back free buffers beyond :attr:`KEEP_BYTES`, largest first."""
        free = sorted(self._free_ones(), key=lambda b: b.nbytes)
        total, dropped = 0, []
        for buffer in free:
            total += buffer.nbytes
            if total > self.KEEP_BYTES:
                dropped.append(id(buffer))
        self.buffers = [b for b in self.buffers if id(b) not in dropped]


_POOLS = threading.local()


def pool() -> BufferPool:
    """This thread's buffer pool."""
    if not hasattr(_POOLS, "pool"):
        _POOLS.pool = BufferPool()
    return _POOLS.pool
