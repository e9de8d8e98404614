"""Drop reshapes that only insert size-1 dims around row-wise work.

Captured attention views its scores with an extra size-1 dim for the
softmax and drops it after (``[b, kv, g, keys]`` to ``[b, kv, g, 1, keys]``
and back). Such a reshape moves no element, but it is a layout op, so the
partition would cut the segment at it twice: attention, which the search
fuses into one kernel, would come out as three segments. :func:`squeeze`
rewrites a function so that the ops between such a reshape and the
reshapes that drop its dims again compute at the narrower rank, and both
reshapes go: the segment is cut only where a layout op really moves data.

Only element-wise ops, reductions and row norms are rewritten, and only
when every value they read comes from the reshape or from each other and
every value read outside them is read by a reshape back to the narrower
shape; a reduction over an inserted dim keeps the reshape.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.search.labels import constant_attrs

ROW_WISE = (t.ReductionOp, t.RmsNormBase, t.UnaryOp, t.ScalarOp, t.BinaryOp)
"""Ops that compute at any rank and can be rebuilt at a narrower one."""


def inserted_dims(
    before: Sequence[int], after: Sequence[int]
) -> tuple[int, ...] | None:
    """The dims of ``after`` that a reshape from ``before`` inserted with size
    1, when that is all it did; None otherwise."""
    out: list[int] = []
    i = 0
    for j, n in enumerate(after):
        if i < len(before) and before[i] == n:
            i += 1
        elif n == 1:
            out.append(j)
        else:
            return None
    return tuple(out) if i == len(before) and out else None


def squeeze(fn: func.FuncOp) -> int:
    """Rewrite ``fn`` in place as the module says; the reshapes dropped."""
    dropped = 0
    for op in list(fn.body.block.ops):
        if isinstance(op, t.ReshapeBase) and op.parent is not None:
            dropped += _squeeze_from(op)
    return dropped


def _squeeze_from(reshape: t.ReshapeBase) -> int:
    dims = inserted_dims(t.tensor_shape(reshape.input), t.tensor_shape(reshape.result))
    if dims is None:
        return 0
    region = _region(reshape, dims)
    if region is None:
        return 0
    ops, exits = region
    mapping: dict[SSAValue, SSAValue] = {reshape.result: reshape.input}
    for op in ops:
        new = _rebuilt(op, [mapping[v] for v in op.operands], dims)
        assert new.parent is None
        op.parent_block().insert_op_before(new, op)  # type: ignore[union-attr]
        mapping[op.results[0]] = new.results[0]
    for exit_op in exits:
        exit_op.result.replace_all_uses_with(mapping[exit_op.input])
        exit_op.detach()
        exit_op.erase()
    for op in reversed(ops):
        op.detach()
        op.erase()
    reshape.detach()
    reshape.erase()
    return 1 + len(exits)


def _region(
    reshape: t.ReshapeBase, dims: tuple[int, ...]
) -> tuple[list[Operation], list[t.ReshapeBase]] | None:
    """The ops computing at the wider rank from the reshape's result, and the
    reshapes that narrow their results back; None when something else reads
    one of them or one cannot be rebuilt narrower."""
    values: set[SSAValue] = {reshape.result}
    ops: list[Operation] = []
    op = reshape.next_op
    while op is not None:
        if any(v in values for v in op.operands) and not _narrows(op, dims):
            if not _rebuildable(op, dims) or any(v not in values for v in op.operands):
                return None
            ops.append(op)
            values.update(op.results)
        op = op.next_op
    exits: list[t.ReshapeBase] = []
    for v in values:
        for use in v.uses:
            if use.operation in ops:
                continue
            if not _narrows(use.operation, dims):
                return None
            exits.append(use.operation)  # type: ignore[arg-type]
    return (ops, exits) if exits else None


def _narrows(op: Operation, dims: tuple[int, ...]) -> bool:
    """Whether ``op`` is a reshape that drops exactly ``dims`` again."""
    if not isinstance(op, t.ReshapeBase):
        return False
    before, after = t.tensor_shape(op.input), t.tensor_shape(op.result)
    return inserted_dims(after, before) == dims


def _rebuildable(op: Operation, dims: tuple[int, ...]) -> bool:
    if not isinstance(op, ROW_WISE) or len(op.results) != 1:
        return False
    last = len(t.tensor_shape(op.results[0])) - 1
    if isinstance(op, t.ReductionOp):
        return op.dim.value.data not in dims
    return not isinstance(op, t.RmsNormBase) or last not in dims


def _rebuilt(op: Operation, operands: list[SSAValue], dims: tuple[int, ...]):
    """``op`` on the narrower ``operands`` (its dim renumbered)."""
    if isinstance(op, t.ReductionOp):
        dim = op.dim.value.data
        return type(op)(operands[0], dim - sum(d < dim for d in dims))
    return type(op)(*operands, *(value for _, value in constant_attrs(op)))


__all__ = ["inserted_dims", "squeeze"]
