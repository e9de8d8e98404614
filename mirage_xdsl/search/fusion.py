"""The fused default build of a row-local program: one kernel, whole rows.

A program whose every op is element-wise or reads whole rows of the last
dim (``reduce_sum``, ``reduce_max``, ``rms_norm`` over it) needs no kernel
boundary at all: each row is computed from the same rows of its operands.
Inductor emits such a program as one persistent-reduction kernel; this is
the same build as a µGraph: one ``kernel.customized`` whose grid tiles the
leading dims, whose blocks read whole rows, and whose block graph holds the
program's ops as written.

It is a candidate beside the search's own, and the input (one kernel per
op) beside both: a LayerNorm written as ten plain ops is one kernel even
when the search cannot enumerate a ten-op block graph within its budget.
"""

from __future__ import annotations

from mirage_xdsl.dialects.shapes import lift
from mirage_xdsl.search.ugraph import (
    ELEMENTWISE,
    BlockGraph,
    BlockInput,
    KernelOp,
    Op,
    Shape,
    UGraph,
    kernel_shapes,
)

ROW_KINDS = ("reduce_sum", "reduce_max")
"""Reductions a row-local program may hold (over its last dim only)."""

MAX_GRID = 65535
"""Most blocks along one grid dim (CUDA's limit on y and z)."""


def row_local(ug: UGraph) -> bool:
    """Whether every op of ``ug`` is a library op that computes a row of its
    result from the same rows of its operands: every result of one rank,
    arguments of that rank or lower (lined up with the trailing dims)."""
    shapes = kernel_shapes(ug)
    rank = _rank(ug)
    if rank == 0 or any(len(s) != rank for s in shapes[len(ug.inputs) :]):
        return False
    for op in ug.ops:
        if op.graph is not None:
            return False
        if op.kind not in (*ELEMENTWISE, *ROW_KINDS, "rms_norm"):
            return False
        if op.kind in (*ROW_KINDS, "rms_norm") and len(shapes[op.operands[0]]) < rank:
            return False
        if op.kind in ROW_KINDS and op.attrs != (("dim", rank - 1),):
            return False
    return True


def _rank(ug: UGraph) -> int:
    return max((len(s) for s in kernel_shapes(ug)), default=0)


def row_fused(ug: UGraph) -> UGraph | None:
    """``ug`` as one customized kernel over whole rows (before the µGraph
    optimizer); None when it is not :func:`row_local` or its leading dims
    do not fit a grid."""
    if not row_local(ug):
        return None
    rank = _rank(ug)
    shapes = [lift(s, rank) for s in kernel_shapes(ug)]
    rows = tuple(max(s[d] for s in shapes) for d in range(rank - 1))
    split = [d for d, n in enumerate(rows) if n > 1][-3:]
    if any(rows[d] > MAX_GRID for d in split):
        return None
    dims = (*split, *[-1] * (3 - len(split)))
    grid = tuple(rows[d] if d >= 0 else 1 for d in dims)
    first = len(ug.inputs)
    if any(v < first for v in ug.outputs):
        return None  # an argument returned as it is: no kernel writes it
    used = sorted({v for op in ug.ops for v in op.operands if v < first})
    position = {v: i for i, v in enumerate(used)}
    inputs = tuple(
        BlockInput(
            position[v],
            _imap(shapes[v], rows, dims),
            -1,
            None if len(ug.inputs[v]) == rank else rank,
        )
        for v in used
    )

    def local(v: int) -> int:
        return position[v] if v < first else len(inputs) + v - first

    ops = tuple(
        Op(op.kind, tuple(local(v) for v in op.operands), op.attrs) for op in ug.ops
    )
    outputs = tuple((local(v), _imap(shapes[v], rows, dims)) for v in ug.outputs)
    graph = BlockGraph(grid, 1, inputs, ops, outputs)  # type: ignore[arg-type]
    kernel = KernelOp("customized", tuple(used), (), graph)
    outs = tuple(len(ug.inputs) + i for i in range(len(graph.outputs)))
    return UGraph(ug.name, ug.dtype, ug.inputs, (kernel,), outs)


def _imap(shape: Shape, rows: Shape, dims: tuple[int, ...]) -> tuple[int, int, int]:
    """Which dim of a tensor of ``shape`` each grid dim splits: the row dim
    it tiles, or -1 where the tensor is broadcast along it (size 1)."""
    return tuple(  # type: ignore[return-value]
        d if d >= 0 and shape[d] == rows[d] else -1 for d in dims
    )


__all__ = ["row_fused", "row_local"]
