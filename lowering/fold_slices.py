"""``fold-slices``: kernels read a slice of a tensor in place.

A ``kernel.slice`` that is no buffer alias (``aliases.py``: a slice of an
inner dim, the two halves of a rotary embedding's ``rotate_half``) lowered
on its own is a copy kernel: it reads its window and writes it to a new
buffer, which the next kernel reads again. When every user of the slice is a
``kernel.customized`` op (or a bare kernel op, given its default definition
first), this pass removes it: each ``block.input`` that read the slice's
result reads the slice's operand instead, through the slice's window (its
``window`` property). The window's elements are exactly the slice's, in the
same index space, so the reader's maps and tile stay as they are. A reader
that reads the slice transposed gets the window on the swapped dim.

A slice that a function returns, that a reshape reads, or whose reader
already reads a window of it stays a kernel. Like ``fold-transposes``, only
the Triton backend runs the pass (``lowering/triton.py``): a Triton load
takes any offset, where the CUDA C tile copy aligns its vectors to the
window of a copy kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.fold_reads import fold


def _reads_whole(op: kernel.CustomizedOp, index: int) -> bool:
    """Whether operand ``index`` of ``op`` is read only by ``block.input``
    ops with no window of their own."""
    arg = op.entry.args[index]
    return all(
        isinstance(u.operation, block.InputOp) and u.operation.window_of is None
        for u in arg.uses
    )


def _window(read: block.InputOp, op: kernel.SliceOp) -> tuple[int, int, int]:
    """``op``'s window in the view ``read`` indexes (its dim swapped if
    ``read`` reads the source transposed)."""
    dim, start, end = op.window
    swapped = read.swapped_dims
    if swapped is not None and dim in swapped:
        dim = swapped[1] if dim == swapped[0] else swapped[0]
    return (dim, start, end)


def fold_slice(op: kernel.SliceOp) -> bool:
    """Remove ``op`` if its users can read its window of its operand; whether
    it did."""
    if is_alias(op):
        return False

    def windowed(read: block.InputOp, source: SSAValue) -> block.InputOp:
        return block.InputOp(
            source,
            read.input_map,
            read.forloop_dim,
            read.result.type,  # type: ignore[arg-type]
            _window(read, op),
            read.swapped_dims,
        )

    return fold(op, _reads_whole, windowed)


@dataclass(frozen=True)
class FoldSlicesPass(ModulePass):
    """Remove each ``kernel.slice`` that is no buffer alias and is read only
    by customized kernels (or bare kernel ops, customized first): they read
    its window of its operand."""

    name = "fold-slices"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in [o for o in op.walk() if isinstance(o, kernel.SliceOp)]:
            if inner.parent is not None:
                fold_slice(inner)
