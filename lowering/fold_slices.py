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
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.default_customize import PARTITIONS, customize, split_matmul


def _customizable(op: Operation) -> bool:
    """Whether ``default-customize`` gives ``op`` a customized kernel."""
    return (
        isinstance(op, t.TensorOp)
        and op.name.startswith("kernel.")
        and not is_alias(op)
        and op.KIND in PARTITIONS
    )


def _reads_whole(op: kernel.CustomizedOp, index: int) -> bool:
    """Whether operand ``index`` of ``op`` is read only by ``block.input``
    ops with no window of their own."""
    arg = op.entry.args[index]
    return all(
        isinstance(u.operation, block.InputOp) and u.operation.window_of is None
        for u in arg.uses
    )


def _foldable(op: kernel.SliceOp) -> bool:
    """Whether ``op`` is a copy kernel every user of which reads it as a
    customized kernel (or will, once customized) with no window of its own."""
    if is_alias(op):
        return False
    uses = list(op.result.uses)
    for use in uses:
        user = use.operation
        if isinstance(user, kernel.CustomizedOp):
            if not _reads_whole(user, use.index):
                return False
        elif not _customizable(user):
            return False
    return bool(uses)


def _customize_users(op: kernel.SliceOp) -> None:
    """Give each bare kernel op reading ``op`` its default definition."""
    for user in list({u.operation for u in op.result.uses}):
        if isinstance(user, kernel.CustomizedOp):
            continue
        if isinstance(user, kernel.MatmulOp) and split_matmul(user, H100):
            continue
        new = customize(user)  # type: ignore[arg-type]
        Rewriter.replace_op(user, new, new.results)


def _window(read: block.InputOp, op: kernel.SliceOp) -> tuple[int, int, int]:
    """``op``'s window in the view ``read`` indexes (its dim swapped if
    ``read`` reads the source transposed)."""
    dim, start, end = op.window
    swapped = read.swapped_dims
    if swapped is not None and dim in swapped:
        dim = swapped[1] if dim == swapped[0] else swapped[0]
    return (dim, start, end)


def _read_window(user: kernel.CustomizedOp, index: int, op: kernel.SliceOp) -> None:
    """Make operand ``index`` of ``user`` (``op``'s result) ``op``'s operand,
    its ``block.input`` ops reading it through ``op``'s window."""
    body = user.entry
    old = body.args[index]
    new = body.insert_arg(op.input.type, index)
    for use in list(old.uses):
        read = use.operation
        assert isinstance(read, block.InputOp)
        windowed = block.InputOp(
            new,
            read.input_map,
            read.forloop_dim,
            read.result.type,  # type: ignore[arg-type]
            _window(read, op),
            read.swapped_dims,
        )
        windowed.attributes.update(read.attributes)
        Rewriter.replace_op(read, windowed)
    body.erase_arg(old)
    user.operands[index] = op.input


def fold_slice(op: kernel.SliceOp) -> bool:
    """Remove ``op`` if its users can read its window of its operand; whether
    it did."""
    if not _foldable(op):
        return False
    _customize_users(op)
    if not _foldable(op):  # a split-K reshape between
        return False
    for use in list(op.result.uses):
        assert isinstance(use.operation, kernel.CustomizedOp)
        _read_window(use.operation, use.index, op)
    Rewriter.erase_op(op)
    return True


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
