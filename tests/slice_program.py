"""Programs with ``kernel.slice`` for the lowering tests.

Shared by ``tests/test_slice_aliases.py`` (the CUDA C lowering, its emulator
and NVRTC; Triton's compiler) and ``tests/triton_interpret.py`` (Triton's
interpreter). A contiguous slice that is not returned is an alias of its
operand's buffer (``lowering/aliases.py``); the others are copy kernels.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.builder import new_kernel_graph


def projection(rows: int = 1) -> ModuleOp:
    """One token's fused projection ``[rows, 1, 96]`` cut into parts of 64,
    16 and 16: the first read by ``exp``, the second reshaped and scaled,
    the third returned. At one row the first two are read in place."""
    g = new_kernel_graph("projection")
    x, w = g.new_input((rows, 1, 64)), g.new_input((64, 96))
    y = g.matmul(x, w)
    q, k, v = g.slice(y, 2, 0, 64), g.slice(y, 2, 64, 80), g.slice(y, 2, 80, 96)
    g.mark_output(g.exp(q))
    g.mark_output(g.mul_scalar(g.reshape(k, (rows, 1, 2, 8)), 2.0))
    g.mark_output(g.reshape(v, (rows, 1, 2, 8)))
    return g.module()


def batched_projection() -> ModuleOp:
    """:func:`projection` at two rows: no part is contiguous, each is copied."""
    return projection(rows=2)


def nested() -> ModuleOp:
    """A slice of a slice of a kernel's result (offsets 16, then 16 more) and
    a slice of an input (rows 2 and 3 of a ``[6, 32]`` input)."""
    g = new_kernel_graph("nested")
    x, w = g.new_input((1, 64)), g.new_input((64, 96))
    outer = g.slice(g.matmul(x, w), 1, 16, 96)
    g.mark_output(g.exp(g.slice(outer, 1, 16, 48)))
    rows = g.new_input((6, 32))
    g.mark_output(g.mul_scalar(g.slice(rows, 0, 2, 4), 3.0))
    return g.module()


PROGRAMS = {
    "projection": projection,
    "batched_projection": batched_projection,
    "nested": nested,
}
