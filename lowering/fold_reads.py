"""Folding a layout op into the kernels that read it.

What ``fold-transposes`` and ``fold-slices`` share. A layout op whose every
user is a ``kernel.customized`` op (or a bare kernel op, which is given its
default definition first) is removed: each ``block.input`` that read its
result reads its operand instead, rebuilt by the pass's ``read_as`` (with
the transpose's dims swapped, or through the slice's window). Which reads
may be rebuilt so is the pass's ``reads_ok``.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.gpu_target import current
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.default_customize import PARTITIONS, customize, split_matmul

ReadsOk = Callable[[kernel.CustomizedOp, int], bool]
"""Whether operand ``index`` of a customized kernel is read so that the
layout op can fold into its reads."""

ReadAs = Callable[[block.InputOp, SSAValue], block.InputOp]
"""A read of the layout op's result, rebuilt to read its operand (the new
block argument)."""


def customizable(op: Operation) -> bool:
    """Whether ``default-customize`` gives ``op`` a customized kernel."""
    return (
        isinstance(op, t.TensorOp)
        and op.name.startswith("kernel.")
        and not is_alias(op)
        and op.KIND in PARTITIONS
    )


def foldable(op: Operation, reads_ok: ReadsOk) -> bool:
    """Whether every user reads ``op``'s result as a customized kernel (or
    will, once customized) whose reads ``reads_ok`` accepts."""
    uses = list(op.results[0].uses)
    for use in uses:
        user = use.operation
        if isinstance(user, kernel.CustomizedOp):
            if not reads_ok(user, use.index):
                return False
        elif not customizable(user):
            return False
    return bool(uses)


def customize_users(op: Operation) -> None:
    """Give each bare kernel op reading ``op`` its default definition."""
    for user in list({u.operation for u in op.results[0].uses}):
        if isinstance(user, kernel.CustomizedOp):
            continue
        if isinstance(user, kernel.MatmulOp) and split_matmul(user, current()):
            continue
        new = customize(user)  # type: ignore[arg-type]
        Rewriter.replace_op(user, new, new.results)


def fold(op: Operation, reads_ok: ReadsOk, read_as: ReadAs) -> bool:
    """Remove ``op`` if its users can read its operand as ``read_as``
    rebuilds their reads; whether it did."""
    if not foldable(op, reads_ok):
        return False
    customize_users(op)
    if not foldable(
        op, reads_ok
    ):  # a default tile that does not fit, or a split-K reshape
        return False
    source = op.operands[0]
    for use in list(op.results[0].uses):
        user = use.operation
        assert isinstance(user, kernel.CustomizedOp)
        _read_source(user, use.index, source, read_as)
    Rewriter.erase_op(op)
    return True


def _read_source(
    user: kernel.CustomizedOp, index: int, source: SSAValue, read_as: ReadAs
) -> None:
    """Make operand ``index`` of ``user`` ``source``, each ``block.input``
    that read the old operand rebuilt by ``read_as``."""
    body = user.entry
    old = body.args[index]
    new = body.insert_arg(source.type, index)
    for use in list(old.uses):
        read = use.operation
        assert isinstance(read, block.InputOp)
        rebuilt = read_as(read, new)
        rebuilt.attributes.update(read.attributes)
        Rewriter.replace_op(read, rebuilt)
    body.erase_arg(old)
    user.operands[index] = source
