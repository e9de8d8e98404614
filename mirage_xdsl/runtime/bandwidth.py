"""The copy bandwidth every memory floor is measured against.

A floor is the fewest bytes a program must move over the bandwidth of a
large device-to-device copy, counting bytes read and written. The copy is
an element-wise kernel (``dst = src · 1`` over 1 GiB) replayed in a CUDA
graph by the project's timer, so it moves memory the way the kernels it is
compared with do. ``dst.copy_(src)`` captured in a graph is not used: it
becomes a memcpy node, which at this size a copy engine serves, and on an
H100 it measured 2.44 TB/s where the kernel, and the same copy called
eagerly, moved 2.97–3.03.
"""

from __future__ import annotations

from typing import Any

COPY_BYTES = 1 << 30
"""Bytes the copy reads (and writes)."""
CALLS = 4
"""Copies in the timed graph."""


def copy_bandwidth(timer: Any = None, device: str = "cuda") -> float:
    """Bytes per second of a 1 GiB copy kernel, counting bytes read and
    written; ``timer`` a :class:`~mirage_xdsl.runtime.timer.GraphTimer`
    (a new one by default)."""
    import torch

    from mirage_xdsl.runtime.timer import GraphTimer

    timer = timer or GraphTimer(device=device)
    src = torch.empty(COPY_BYTES // 2, dtype=torch.float16, device=device)
    src.uniform_(-1, 1)
    dst = torch.empty_like(src)
    us = timer.per_call_us([lambda: torch.mul(src, 1.0, out=dst)], CALLS)
    return 2 * COPY_BYTES / (us * 1e-6)
