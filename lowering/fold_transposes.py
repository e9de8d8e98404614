"""``fold-transposes``: kernels read a transposed tensor in place.

A ``kernel.transpose`` lowered on its own is a copy kernel: it reads and
writes the whole tensor on every call (the key cache, where attention
multiplies by ``k.transpose(-1, -2)``). When every user of the transpose is a
``kernel.customized`` op, this pass removes it: each ``block.input`` that
read the transpose's result reads the transpose's operand instead, with the
two dims swapped (its ``transpose`` property); its maps and window already
count the dims of the transposed view, so they stay as they are. A bare
kernel op reading the transpose is first given its default definition
(``default-customize``'s partition for it), so the pass runs before
``default-customize`` turns the transposes themselves into copy kernels.

A transpose that a function returns, that a reshape reads, or whose reader
already reads a transposed view stays a kernel; so does one whose reader's
tile holds less than a DRAM sector (:data:`SECTOR_BYTES`) of each source row
it touches, short of whole rows: its loads would fetch sectors mostly to drop
them, where the copy kernel moves whole rows.

Only the Triton backend runs the pass (``lowering/triton.py``): a Triton load
takes any strides and Triton's coalescing follows the contiguous dim of the
pointer arithmetic. The CUDA C tile copy (``tile_copies.py``) moves a
transposed tile with scalar copies, where the copy kernel's tiles move in
16-byte ``cp.async`` vectors, so for CUDA C the copy kernel stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.lowering.fold_reads import fold

SECTOR_BYTES = 32
"""What device memory moves at once: a transposed read whose tile covers less
of a source row than this (and not the whole row) wastes most of each."""


def _whole_sectors(read: block.InputOp, dims: tuple[int, int]) -> bool:
    """Whether ``read``'s tile, read through the swapped ``dims``, covers a
    sector of each source row it touches, or the whole row."""
    source = t.tensor_shape(read.source)
    last = len(source) - 1
    if last not in dims:
        return True  # the rows stay the tile's rows
    lifted = len(t.tensor_shape(read.result)) - len(source)
    row = (dims[0] if dims[1] == last else dims[1]) + lifted  # in the view
    extent = t.tensor_shape(read.result)[row]
    elem_bytes = t.element_type(read.source).bitwidth // 8  # type: ignore[attr-defined]
    return extent * elem_bytes >= SECTOR_BYTES or extent == read.viewed_shape[row]


def _reads_plainly(op: kernel.CustomizedOp, index: int, dims: tuple[int, int]) -> bool:
    """Whether operand ``index`` of ``op`` is read only by ``block.input``
    ops that read it untransposed, whose tiles read through ``dims`` would
    cover whole sectors."""
    arg = op.entry.args[index]
    return all(
        isinstance(u.operation, block.InputOp)
        and u.operation.swapped_dims is None
        and _whole_sectors(u.operation, dims)
        for u in arg.uses
    )


def fold_transpose(op: kernel.TransposeOp) -> bool:
    """Remove ``op`` if its users can read its operand transposed; whether
    it did."""

    def reads_ok(user: kernel.CustomizedOp, index: int) -> bool:
        return _reads_plainly(user, index, op.dims)

    def swapped(read: block.InputOp, source: SSAValue) -> block.InputOp:
        return block.InputOp(
            source,
            read.input_map,
            read.forloop_dim,
            read.result.type,  # type: ignore[arg-type]
            read.window_of,
            op.dims,
        )

    return fold(op, reads_ok, swapped)


@dataclass(frozen=True)
class FoldTransposesPass(ModulePass):
    """Remove each ``kernel.transpose`` read only by customized kernels (or
    bare kernel ops, customized first): they read its operand transposed."""

    name = "fold-transposes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in [o for o in op.walk() if isinstance(o, kernel.TransposeOp)]:
            if inner.parent is not None:  # not replaced as a folded one's user
                fold_transpose(inner)
